import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { createProducer } from '../../src/producer/index.js';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import type { Simulator } from '../../src/simulator/index.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext } from '../context.js';
import { monotonicUs, summariseFile, type ProfileSummary } from '../cpu-profile.js';
import { watchList } from '../evidence.js';
import { errorLines, launchRoles, roleEnv, startBaseline } from '../fleet.js';
import { startProbe, type ProbeResult } from '../probes.js';
import {
  BASELINE_QUEUE,
  baselineQueue,
  benchSimulator,
  enqueueBaseline,
  enqueueOurs,
  followUps,
  waitUntil,
} from '../workload.js';

/**
 * One run of scenario 1: a fleet of workers (ours or the baseline) against a fresh simulator and
 * namespace, warmed up, then timed end to end and draining a backlog.
 */

/** Worker concurrency of both sides. */
export const CONCURRENCY = 64;
/** Projects the follow-ups are spread over. */
export const PROJECTS = 100;
/** Warm-up follow-ups before measuring: JIT, sockets and script caches are not what is measured. */
export const WARM_UP = 200;

/** Which side runs. */
export type Kind = 'ours' | 'baseline';

/** What one run measured. */
export interface Run {
  /** Follow-ups per second from the first enqueue to the last delivery, workers running. */
  readonly endToEnd: number;
  /** Follow-ups per second draining a backlog enqueued into the paused queue. */
  readonly drain: number;
  /** CPU the worker processes used per follow-up while the backlog drained, in µs. */
  readonly drainWorkerCpuUs: number;
  readonly enqueueMs: number;
  readonly endToEndMs: number;
  readonly probe: ProbeResult;
  readonly drainProbe: ProbeResult;
  readonly errors: readonly string[];
}

/** Functions whose inclusive share of a worker's busy time the profile reports. */
const PROFILED = [
  'checkFollowUp',
  'acquire',
  'sendMessage',
  'markSent',
  'request',
  'moveToCompleted',
];

/** CPU time of the worker processes over a probe's period, in ms. */
function workerCpuMs(probe: ProbeResult): number {
  return probe.cpu
    .filter(({ label }) => label.startsWith('worker'))
    .reduce((sum, { cpuMs }) => sum + cpuMs, 0);
}

/** Resolves once the simulator holds `total` deliveries; to the time of the last one. */
async function delivered(simulator: Simulator, total: number): Promise<number> {
  await waitUntil(() => simulator.deliveries.length >= total, `${total} deliveries`);
  return simulator.deliveries[total - 1]?.at ?? Date.now();
}

/** A fleet of one side in a fresh namespace, with the producer side that feeds it. */
async function fleetOf(ctx: BenchContext, kind: Kind, workers: number, profileDir?: string) {
  const ns = await ctx.fresh('dispatch');
  const simulator = await benchSimulator();
  const options = profileDir ? { profileDir } : {};
  const processes =
    kind === 'ours'
      ? await launchRoles(ctx, ns, 'worker', workers, roleEnv(ctx, ns, simulator), options)
      : await startBaseline(ctx, ns, simulator, workers, CONCURRENCY, options);
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const bare = baselineQueue(ctx, ns);
  const queueName = kind === 'ours' ? QUEUE_NAMES.dispatch : BASELINE_QUEUE;
  const queue = new Queue(queueName, { connection: ctx.connection, prefix: ns.prefix });
  return {
    simulator,
    processes,
    queue,
    enqueue: async (n: number, tag: string) => {
      if (kind === 'ours') await enqueueOurs(producer, followUps(n, PROJECTS, tag));
      else await enqueueBaseline(bare, followUps(n, PROJECTS, tag));
    },
    close: async () => {
      await stopAll(processes);
      await Promise.all([producer.close(), bare.close(), queue.close(), simulator.close()]);
    },
  };
}

type Fleet = Awaited<ReturnType<typeof fleetOf>>;

/** Enqueues `n` into the paused queue, resumes it and times the drain; `before` = deliveries so far. */
async function drain(fleet: Fleet, n: number, before: number): Promise<number> {
  await fleet.queue.pause();
  await fleet.enqueue(n, 'drain');
  const resumed = Date.now();
  await fleet.queue.resume();
  return (n * 1000) / ((await delivered(fleet.simulator, before + n)) - resumed);
}

/** One measured run: warm-up, end to end, then drain. */
export async function once(
  ctx: BenchContext,
  kind: Kind,
  workers: number,
  n: number,
): Promise<Run> {
  const fleet = await fleetOf(ctx, kind, workers);
  try {
    await fleet.enqueue(WARM_UP, 'warm');
    await delivered(fleet.simulator, WARM_UP);
    const watched = watchList(ctx.redisPid, [{ label: 'worker', processes: fleet.processes }]);
    const probe = await startProbe(ctx.admin, watched);
    const started = Date.now();
    const enqueued = fleet.enqueue(n, 'p').then(() => Date.now() - started);
    const endToEndMs = (await delivered(fleet.simulator, WARM_UP + n)) - started;
    const result = await probe.stop();
    const drainProbe = await startProbe(ctx.admin, watched);
    const drainRate = await drain(fleet, n, WARM_UP + n);
    const drainProbeResult = await drainProbe.stop();
    return {
      endToEnd: (n * 1000) / endToEndMs,
      drain: drainRate,
      drainWorkerCpuUs: (workerCpuMs(drainProbeResult) * 1000) / n,
      enqueueMs: await enqueued,
      endToEndMs,
      probe: result,
      drainProbe: drainProbeResult,
      errors: await stopAll(fleet.processes).then(() => errorLines(fleet.processes)),
    };
  } finally {
    await fleet.close();
  }
}

/**
 * A drain with one worker process under `--cpu-prof`, outside the measured runs (profiling slows
 * it a little): where that worker's CPU time goes while it drains (start-up is left out).
 */
export async function profiledDrain(
  ctx: BenchContext,
  kind: Kind,
  n: number,
): Promise<ProfileSummary> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-profile-'));
  try {
    const fleet = await fleetOf(ctx, kind, 1, dir);
    let window = { fromUs: 0, toUs: 0 };
    try {
      await fleet.enqueue(WARM_UP, 'warm');
      await delivered(fleet.simulator, WARM_UP);
      const fromUs = monotonicUs();
      await drain(fleet, n, WARM_UP);
      window = { fromUs, toUs: monotonicUs() };
    } finally {
      await fleet.close();
    }
    return summariseFile(dir, PROFILED, window);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
