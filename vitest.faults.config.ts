import { defineConfig } from 'vitest/config';

/**
 * The fault suite (issue 7): crashes, Redis restarts, API faults, bad input, poison jobs and
 * secrets, with the figures written to RELIABILITY.md by the reliability reporter.
 * `FAULTS_SCALE=full` runs the sizes; the default is the CI size.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Drills kill and restart processes for minutes at the full scale.
    testTimeout: 20 * 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 60_000,
    // One file at a time: the drills start many processes on 2 cores, and their timing (kills at
    // random moments, stalls, grace periods) should not depend on what another file is doing.
    fileParallelism: false,
    reporters: ['default', './test/faults/support/reporter.ts'],
  },
});
