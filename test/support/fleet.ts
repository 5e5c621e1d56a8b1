import { afterEach, beforeEach } from 'vitest';
import { createProducer, type Producer } from '../../src/producer/index.js';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import type { Delivery, Simulator } from '../../src/simulator/index.js';
import type { CliProcess } from './cli.js';
import { waitForEvents } from './events.js';
import { useNamespace, type Namespace } from './namespace.js';
import { stopAll } from './roles.js';
import { FAST_SETTINGS } from './service.js';
import { TEST_API_KEY } from './simulator.js';

/** The environment of a CLI role working in `ns` against `simulator`. */
export function fleetEnv(
  ns: Namespace,
  simulator: Simulator,
  settings: Record<string, string> = {},
): Record<string, string> {
  return ns.env({
    ...FAST_SETTINGS,
    AGENT_API_URL: simulator.url,
    AGENT_API_KEY: TEST_API_KEY,
    STALLED_TIMEOUT: '3s',
    ...settings,
  });
}

/**
 * `projects` x `jobs` x `perJob` follow-ups, in enqueue order: round n of every agent job before
 * round n + 1, so order per agent job is the round number. Seeds the agent jobs in the simulator.
 */
export function grid(
  simulator: Simulator,
  projects: number,
  jobs: number,
  perJob: number,
  tag = 'p',
): FollowUpInput[] {
  const inputs: FollowUpInput[] = [];
  for (let p = 0; p < projects; p++)
    for (let j = 0; j < jobs; j++) simulator.seedJob(`${tag}${p}`, `j${j}`);
  for (let n = 1; n <= perJob; n++) {
    for (let p = 0; p < projects; p++) {
      for (let j = 0; j < jobs; j++)
        inputs.push({ projectId: `${tag}${p}`, jobId: `j${j}`, prompt: `${tag}${p}/j${j} #${n}` });
    }
  }
  return inputs;
}

/** The round numbers (`#n`) delivered to one agent job, in arrival order. */
export function roundsOf(
  deliveries: readonly Delivery[],
  projectId: string,
  jobId: string,
): number[] {
  return deliveries
    .filter((d) => d.projectId === projectId && d.jobId === jobId)
    .map((d) => Number(d.prompt.split('#')[1]));
}

/** One test's fleet: its namespace, a producer, and the CLI processes it started. */
export interface Fleet {
  readonly ns: Namespace;
  readonly producer: Producer;
  /**
   * Processes to stop after the test; tests add to it and replace the ones they kill (a killed
   * one left here fails the test: it did not exit 0).
   */
  processes: CliProcess[];
  /** Waits until the stream of this namespace holds `count` events, and returns them. */
  events(count: number, timeoutMs?: number): ReturnType<typeof waitForEvents>;
}

/**
 * Gives each test of the file a fresh {@link Fleet}, and after it stops every process, closes the
 * producer and deletes the namespace. A process that does not exit 0 on SIGTERM (see
 * {@link stopAll}) fails the test, after the clean-up. Returns a getter (the fleet exists once `beforeEach` ran).
 */
export function useFleet(label: string, simulator: () => Simulator): () => Fleet {
  let fleet: Fleet | undefined;
  // What stopAll threw, thrown again by the last after-hook: once the namespace is cleaned up.
  let unclean: unknown;
  afterEach(() => {
    const error = unclean;
    unclean = undefined;
    if (error !== undefined) throw error;
  });
  const namespace = useNamespace(label, { simulator });
  beforeEach(() => {
    const ns = namespace();
    const producer = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix });
    fleet = {
      ns,
      producer,
      processes: [],
      events: (count, timeoutMs) => waitForEvents(ns.redis, ns.eventsStream, count, timeoutMs),
    };
  });
  afterEach(async () => {
    if (!fleet) return;
    const { processes, producer } = fleet;
    fleet = undefined;
    try {
      await stopAll(processes);
    } catch (err) {
      unclean = err;
    } finally {
      await producer.close();
    }
  });
  return () => {
    if (!fleet) throw new Error('useFleet(): the fleet exists inside a test');
    return fleet;
  };
}
