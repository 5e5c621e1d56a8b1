import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault suite has its own config and script (npm run test:faults).
    exclude: ['test/faults/**', 'node_modules/**'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Suites that start worker processes compete for 2 cores; a few files at a time keeps timing
    // assertions about budgets honest.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
