import { Queue } from 'bullmq';
import { afterEach, beforeEach } from 'vitest';
import { createProducer, type Producer } from '../../src/producer/index.js';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import type { Delivery, Simulator } from '../../src/simulator/index.js';
import { runCli, type CliProcess } from './cli.js';
import { waitForEvents } from './events.js';
import { createNamespace, eventually, type Namespace } from './namespace.js';
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

/** Starts `count` processes of `command` (worker or poller). */
export function startRoles(
  command: 'worker' | 'poller',
  count: number,
  env: Record<string, string>,
): CliProcess[] {
  return Array.from({ length: count }, () => runCli([command], env));
}

/** Waits until `count` workers are connected to the dispatch queue (their processes are up). */
export async function waitForWorkers(ns: Namespace, count: number): Promise<void> {
  const queue = new Queue(QUEUE_NAMES.dispatch, {
    connection: ns.redis.duplicate(),
    prefix: ns.prefix,
  });
  try {
    await eventually(async () => ((await queue.getWorkersCount()) >= count ? true : undefined), {
      timeoutMs: 30_000,
      what: `${count} workers`,
    });
  } finally {
    await queue.close();
  }
}

/** Stops processes gracefully and checks that each exited 0. */
export async function stopAll(processes: readonly CliProcess[]): Promise<(number | string)[]> {
  return Promise.all(processes.map((p) => p.stop('SIGTERM')));
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

/** The most deliveries to one project within any window of `windowMs` (by arrival time). */
export function busiestWindow(
  deliveries: readonly Delivery[],
  projectId: string,
  windowMs: number,
): number {
  const times = deliveries
    .filter((d) => d.projectId === projectId)
    .map((d) => d.at)
    .sort((a, b) => a - b);
  let most = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while ((times[end] as number) - (times[start] as number) >= windowMs) start++;
    most = Math.max(most, end - start + 1);
  }
  return most;
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
  /** Processes to stop after the test; tests add to it and may replace killed ones. */
  processes: CliProcess[];
  /** Waits until the stream of this namespace holds `count` events, and returns them. */
  events(count: number, timeoutMs?: number): ReturnType<typeof waitForEvents>;
}

/**
 * Gives each test of the file a fresh {@link Fleet}, and after it stops every process, closes the
 * producer and deletes the namespace. Returns a getter (the fleet exists once `beforeEach` ran).
 */
export function useFleet(label: string, simulator: () => Simulator): () => Fleet {
  let fleet: Fleet | undefined;
  beforeEach(() => {
    const ns = createNamespace(label);
    const producer = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix });
    fleet = {
      ns,
      producer,
      processes: [],
      events: (count, timeoutMs) => waitForEvents(ns.redis, ns.eventsStream, count, timeoutMs),
    };
    simulator().reset();
  });
  afterEach(async () => {
    if (!fleet) return;
    await stopAll(fleet.processes);
    await fleet.producer.close();
    await fleet.ns.cleanup();
    fleet = undefined;
  });
  return () => {
    if (!fleet) throw new Error('useFleet(): the fleet exists inside a test');
    return fleet;
  };
}
