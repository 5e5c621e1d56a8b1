import { afterEach, beforeEach, describe, it } from 'vitest';
import { createProducer, type Producer } from '../../src/producer/index.js';
import type { Simulator } from '../../src/simulator/index.js';
import type { CliProcess } from '../support/cli.js';
import { createNamespace, type Namespace } from '../support/namespace.js';
import { useSimulator } from '../support/simulator.js';
import { runCrashCase, type CrashCase } from './support/crash-case.js';
import { openProbe, type Probe } from './support/quiet.js';
import { outcomeOf, UNLIMITED, workTimeMs } from './support/traffic.js';

/**
 * The fixtures of a crash drill: a simulator for the describe block, and per test a namespace, a
 * producer, a probe, and the processes started (SIGKILLed after the test if still running).
 */
function useCrashFixtures(role: 'worker' | 'poller'): () => CrashCase {
  const simulator = useSimulator({
    workTimeMs,
    outcome: (_project, _job, prompt) => outcomeOf(prompt),
    sendLimit: UNLIMITED,
    // Answers take 0.1–0.5 s, so a kill finds sends in flight and poll ticks under way.
    faults: { latencyMs: [100, 500] },
  });
  let current: { ns: Namespace; producer: Producer; probe: Probe } | undefined;
  let processes: CliProcess[] = [];
  beforeEach(() => {
    const ns = createNamespace(`f-${role}`);
    current = {
      ns,
      producer: createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix }),
      probe: openProbe(ns.redisUrl, ns.prefix, ns.eventsStream),
    };
    simulator().reset();
  });
  afterEach(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    processes = [];
    await current?.producer.close();
    await current?.probe.close();
    await current?.ns.cleanup();
  });
  return () => {
    if (!current) throw new Error('crash fixtures exist only inside a test');
    const sim: Simulator = simulator();
    return {
      role,
      simulator: sim,
      ...current,
      track: (started) => (processes = [...new Set([...processes, ...started])]),
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
