import type { Redis } from 'ioredis';
import { createProducer } from '../../src/producer/index.js';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import type { Simulator } from '../../src/simulator/index.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext, Namespace } from '../context.js';
import { watchList } from '../evidence.js';
import { launchRoles, roleEnv } from '../fleet.js';
import { cpuMsOf, probeWork, type ProbeResult } from '../probes.js';
import { num } from '../stats.js';
import { benchSimulator, enqueueOurs, followUps, waitUntil } from '../workload.js';

/**
 * The measurement of scenario 5: follow-ups sent in a burst, runs of 2 to 5 s, one poller
 * process tracking them all to their events; then a few seconds with nothing to track.
 */

export const WORKERS = 2;
/**
 * ACTIVE_GRACE is 20 s instead of the default 2 min only to bound the run: a follow-up whose
 * seen-active mark is lost (see the report) waits that long before it ends.
 */
export const ACTIVE_GRACE_MS = 20_000;
const SETTINGS = {
  POLL_INTERVAL: '250ms',
  POLL_MIN_INTERVAL: '250ms',
  POLL_MAX_INTERVAL: '5s',
  ACTIVE_GRACE: `${ACTIVE_GRACE_MS / 1000}s`,
};
const IDLE_MS = 3_000;

/** Ticks of one period, from BullMQ's events stream of the poll queue. */
export interface Ticks {
  readonly ran: number;
  readonly skipped: number;
}

/** Run end → event latencies by when the run ended, against the arrival of the last send. */
export interface LatenciesByPhase {
  readonly whileSending: number[];
  readonly afterSends: number[];
}

/** What the run measured. */
export interface PollerRun {
  readonly n: number;
  readonly gets: number;
  /** GETs made before the last send arrived. */
  readonly getsWhileSending: number;
  readonly pollerCpuMs: number;
  readonly sending: ProbeResult;
  readonly tracking: ProbeResult;
  readonly trackingTicks: Ticks;
  readonly idle: ProbeResult;
  readonly idleTicks: Ticks;
  /** Run end (in the simulator) → event on the stream, per follow-up. */
  readonly latencies: readonly number[];
  /**
   * The same from when the simulator's timer turned the run terminal: later than the drawn end
   * where the bench's busy event loop fired it late (a read in between still saw it active).
   */
  readonly firedLatencies: readonly number[];
  /** The same, split by when the run ended: while follow-ups were still being sent, or after. */
  readonly byPhase: LatenciesByPhase;
  /** Follow-ups whose event came only once ACTIVE_GRACE had passed, and the GETs they took. */
  readonly graceEnded: number;
  readonly graceGets: number;
}

async function ticksBetween(admin: Redis, ns: Namespace, from: number, to: number): Promise<Ticks> {
  const entries = await admin.xrange(`${ns.prefix}:${QUEUE_NAMES.poll}:events`, from, to);
  let ran = 0;
  let skipped = 0;
  for (const [, fields] of entries) {
    if (fields[fields.indexOf('event') + 1] !== 'completed') continue;
    const value = fields[fields.indexOf('returnvalue') + 1] ?? '';
    if (value.includes('"ran":true')) ran += 1;
    else skipped += 1;
  }
  return { ran, skipped };
}

/** Latencies from run end to event, and the follow-ups that ended only by ACTIVE_GRACE. */
async function readEvents(
  admin: Redis,
  ns: Namespace,
  { ends, fired }: RunEnds,
  simulator: Simulator,
  lastSendMs: number,
) {
  const latencies: number[] = [];
  const firedLatencies: number[] = [];
  const byPhase: LatenciesByPhase = { whileSending: [], afterSends: [] };
  let graceEnded = 0;
  let graceGets = 0;
  for (const [id, fields] of await admin.xrange(ns.eventsStream, '-', '+')) {
    const field = (name: string) => fields[fields.indexOf(name) + 1] ?? '';
    const key = `${field('projectId')}/${field('jobId')}`;
    const end = ends.get(key);
    if (end !== undefined) {
      const latency = Number(id.split('-')[0]) - end;
      latencies.push(latency);
      firedLatencies.push(Number(id.split('-')[0]) - Math.max(end, fired.get(key) ?? end));
      byPhase[end < lastSendMs ? 'whileSending' : 'afterSends'].push(latency);
    }
    const event = JSON.parse(field('event')) as { sentAt: string; finishedAt: string };
    if (Date.parse(event.finishedAt) - Date.parse(event.sentAt) >= ACTIVE_GRACE_MS) {
      graceEnded += 1;
      graceGets += simulator.countGets(field('projectId'), field('jobId'));
    }
  }
  return { latencies, firedLatencies, byPhase, graceEnded, graceGets };
}

/** When each run ends: as drawn, and when the simulator's timer (set just after) fired. */
interface RunEnds {
  readonly ends: Map<string, number>;
  readonly fired: Map<string, number>;
}

/** A simulator whose runs last 2 to 5 s, recording when each will end; a poller; workers. */
async function setUp(ctx: BenchContext) {
  const ns = await ctx.fresh('poller');
  const runEnds: RunEnds = { ends: new Map(), fired: new Map() };
  // Called once per accepted send, when the run starts: records when the run will end.
  const workTimeMs = (projectId: string, jobId: string) => {
    const workMs = 2_000 + Math.round(Math.random() * 3_000);
    const key = `${projectId}/${jobId}`;
    runEnds.ends.set(key, Date.now() + workMs);
    setTimeout(() => runEnds.fired.set(key, Date.now()), workMs).unref();
    return workMs;
  };
  const simulator = await benchSimulator({ workTimeMs });
  const env = roleEnv(ctx, ns, simulator, SETTINGS);
  const poller = await launchRoles(ctx, ns, 'poller', 1, env);
  const workers = await launchRoles(ctx, ns, 'worker', WORKERS, env);
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const roles = [
    { label: 'poller', processes: poller },
    { label: 'worker', processes: workers },
  ];
  return { ns, runEnds, simulator, poller, workers, producer, roles };
}

/** Runs scenario 5 once with `n` follow-ups. */
export async function measurePoller(ctx: BenchContext, n: number): Promise<PollerRun> {
  const { ns, runEnds, simulator, poller, workers, producer, roles } = await setUp(ctx);
  const pollerPid = poller[0]?.child.pid ?? 0;
  const pollerOnly = watchList(ctx.redisPid, roles.slice(0, 1));
  const allEvents = async () => (await ctx.admin.xlen(ns.eventsStream)) >= n;
  try {
    // The tick counts come from BullMQ's events stream of the poll queue, which the service caps
    // near 100 entries (nothing of it reads the stream): the bench lifts the cap for its count.
    await ctx.admin.hset(`${ns.prefix}:${QUEUE_NAMES.poll}:meta`, 'opts.maxLenEvents', 1_000_000);
    const cpuStart = cpuMsOf(pollerPid);
    const sending = await probeWork(ctx.admin, watchList(ctx.redisPid, roles), async () => {
      await enqueueOurs(producer, followUps(n, 100));
      await waitUntil(() => simulator.deliveries.length >= n, `${n} deliveries`, 120_000, 20);
    });
    const lastSendMs = Date.now();
    await stopAll(workers);
    const getsWhileSending = simulator.countGets();
    ctx.progress('poller', `${num(n)} sent; ${num(getsWhileSending)} GETs so far`);
    const trackingStart = Date.now();
    const tracking = await probeWork(ctx.admin, pollerOnly, () =>
      waitUntil(allEvents, `${n} events`, ACTIVE_GRACE_MS + 120_000, 100),
    );
    const pollerCpuMs = cpuMsOf(pollerPid) - cpuStart;
    const gets = simulator.countGets();
    const idleStart = Date.now();
    const idle = await probeWork(
      ctx.admin,
      pollerOnly,
      () => new Promise((r) => setTimeout(r, IDLE_MS)),
    );
    return {
      ...{ n, gets, getsWhileSending, pollerCpuMs, sending, tracking, idle },
      trackingTicks: await ticksBetween(ctx.admin, ns, trackingStart, idleStart),
      idleTicks: await ticksBetween(ctx.admin, ns, idleStart, Date.now()),
      ...(await readEvents(ctx.admin, ns, runEnds, simulator, lastSendMs)),
    };
  } finally {
    await stopAll([...workers, ...poller]);
    await Promise.all([producer.close(), simulator.close()]);
  }
}
