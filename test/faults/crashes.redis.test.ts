import { describe, it } from 'vitest';
import { useSimulator } from '../support/simulator.js';
import { runCrashCase, type CrashCase } from './support/crash-case.js';
import { useDrill } from './support/fixture.js';
import { DRILL_SIMULATOR } from './support/traffic.js';

/**
 * The fixtures of a crash drill: a simulator for the describe block, and per test a
 * {@link useDrill} drill (namespace, producer, probe, processes SIGKILLed after the test).
 */
function useCrashFixtures(role: 'worker' | 'poller'): () => CrashCase {
  const simulator = useSimulator({
    ...DRILL_SIMULATOR,
    // Answers take 0.1–0.5 s, so a kill finds sends in flight and poll ticks under way.
    faults: { latencyMs: [100, 500] },
  });
  const drill = useDrill(`f-${role}`, simulator);
  return () => {
    const d = drill();
    return {
      role,
      simulator: simulator(),
      ns: d.ns,
      producer: d.producer,
      probe: d.probe,
      track: (started) => (d.processes = [...new Set([...d.processes, ...started])]),
    };
  };
}

describe('1. worker crashes', () => {
  const fixtures = useCrashFixtures('worker');

  it('loses nothing and sends nothing twice while workers are SIGKILLed at random moments', (ctx) =>
    runCrashCase(ctx, fixtures()));
});

describe('2. poller crashes', () => {
  const fixtures = useCrashFixtures('poller');

  it('loses nothing and publishes nothing twice while pollers are SIGKILLed at random moments', (ctx) =>
    runCrashCase(ctx, fixtures()));
});
