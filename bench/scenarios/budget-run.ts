import { Queue } from 'bullmq';
import type { DispatchInput } from '../../src/dispatch/creation.js';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { createProducer } from '../../src/producer/index.js';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import type { Delivery } from '../../src/simulator/index.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext } from '../context.js';
import { intentToArrivalMs } from '../deliveries.js';
import { watchList } from '../evidence.js';
import { errorLines, launchRoles, roleEnv } from '../fleet.js';
import {
  blockingLatenessMs,
  commandDelta,
  commandStats,
  startProbe,
  type ProbeResult,
} from '../probes.js';
import { num } from '../stats.js';
import { benchSimulator, enqueueOurs, followUps, waitUntil } from '../workload.js';

/**
 * One run of scenario 3: a backlog on ten projects, released at once to three warm workers, then
 * measured for a fixed period from the first send while the backlog lasts. The simulator
 * enforces the same 50 per 5 s and answers 429 above it.
 */

export const MAX = 50;
export const WINDOW_MS = 5_000;
export const PROJECTS = 10;
export const WORKERS = 3;
/** Redis's default `hz`, as production runs it. */
export const DEFAULT_HZ = 10;

/** How precisely a parked job wakes: BullMQ's wake-ups are BZPOPMIN timeouts. */
export interface WakeUps {
  /** Redis `hz`: how often an idle Redis checks blocked clients' timeouts. */
  readonly hz: number;
  /** How late a BZPOPMIN returned after its timeout at this hz, measured before the run. */
  readonly lateMs: readonly number[];
}

/** What one run saw, within its measured period. */
export interface BudgetRun {
  /** Follow-ups enqueued, all of them into the paused queue. */
  readonly n: number;
  readonly periodMs: number;
  readonly wake: WakeUps;
  readonly deliveries: readonly Delivery[];
  /** Arrival times of the sends the simulator answered 429, ms after the first send. */
  readonly tooManyAtMs: readonly number[];
  /** Counted from before the queue was resumed to the end of the period. */
  readonly probe: ProbeResult;
  /** Per send: simulator arrival minus ACQUIRE's time (the record's sentAt). */
  readonly lagMs: readonly number[];
  readonly errors: readonly string[];
}

/**
 * Follow-ups per project for a period: what a perfect limiter could send in it, plus a tenth, so
 * the backlog outlasts the period.
 */
function perProjectFor(periodMs: number): number {
  return Math.ceil(MAX * (1 + (periodMs / WINDOW_MS) * 1.1));
}

/**
 * Every {@link CREATION_EVERY}th input made a creation of an agent job in its project: creations
 * and sends share the project's window (`BUDGET_SCOPE=shared`, the default), as the simulator's.
 */
export const CREATION_EVERY = 4;

function withCreations(inputs: readonly FollowUpInput[]): DispatchInput[] {
  return inputs.map(({ projectId, prompt }, i) =>
    i % CREATION_EVERY === 0 ? { projectId, prompt, create: true as const } : inputs[i]!,
  );
}

/** Waits for the period to pass from the first send, printing progress. */
async function runPeriod(
  ctx: BenchContext,
  deliveries: () => readonly Delivery[],
  periodMs: number,
) {
  await waitUntil(() => deliveries().length > 0, 'the first send', 60_000, 20);
  const first = deliveries()[0]?.at ?? Date.now();
  for (let at = first + periodMs / 4; at <= first + periodMs; at += periodMs / 4) {
    await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
    ctx.progress(
      'budget',
      `${num(deliveries().length)} sent after ${Math.round((at - first) / 1000)} s`,
    );
  }
  return first;
}

/** Warm-up follow-ups on projects of their own, all within their first window. */
const WARM_UP_PROJECTS = 4;

/** The workers, the simulator and the producer side of one run. */
async function setUp(ctx: BenchContext, hz: number) {
  const ns = await ctx.fresh('budget');
  await ctx.admin.config('SET', 'hz', String(hz));
  const wakeLateMs = await blockingLatenessMs(ctx.admin);
  const simulator = await benchSimulator({ sendLimit: { max: MAX, windowMs: WINDOW_MS } });
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const queue = new Queue(QUEUE_NAMES.dispatch, { connection: ctx.connection, prefix: ns.prefix });
  const env = roleEnv(ctx, ns, simulator, { SEND_RATE_LIMIT: `${MAX}/5s` });
  const fleet = await launchRoles(ctx, ns, 'worker', WORKERS, env);
  return {
    ns,
    wakeLateMs,
    simulator,
    producer,
    queue,
    fleet,
    async tearDown() {
      await stopAll(fleet);
      await Promise.all([producer.close(), queue.close(), simulator.close()]);
      await ctx.admin.config('SET', 'hz', String(DEFAULT_HZ));
    },
  };
}

/**
 * Runs scenario 3 once with Redis at `hz`, measuring `periodMs` from the first send. The workers
 * start and warm up first (JIT, sockets), then the backlog goes into the paused queue, so neither
 * cold workers nor the bench's own enqueueing (in the simulator's process) shape the result.
 */
export async function measureBudget(
  ctx: BenchContext,
  periodMs: number,
  hz: number,
): Promise<BudgetRun> {
  const n = perProjectFor(periodMs) * PROJECTS;
  const run = await setUp(ctx, hz);
  const { simulator, producer, queue, fleet } = run;
  try {
    const warm = MAX * WARM_UP_PROJECTS;
    await enqueueOurs(producer, followUps(warm, WARM_UP_PROJECTS, 'warm'));
    await waitUntil(() => simulator.deliveries.length >= warm, 'warm-up sends');
    simulator.reset();
    await queue.pause();
    const inputs = withCreations(followUps(n, PROJECTS));
    const ids = await enqueueOurs(producer, inputs);
    const commandsBefore = await commandStats(ctx.admin);
    const probe = await startProbe(
      ctx.admin,
      watchList(ctx.redisPid, [{ label: 'worker', processes: fleet }]),
    );
    await queue.resume();
    const first = await runPeriod(ctx, () => simulator.deliveries, periodMs);
    const result = await probe.stop();
    const commands = commandDelta(commandsBefore, await commandStats(ctx.admin));
    const inPeriod = (at: number) => at < first + periodMs;
    return {
      n,
      periodMs,
      wake: { hz, lateMs: run.wakeLateMs },
      deliveries: simulator.deliveries.filter((d) => inPeriod(d.at)),
      tooManyAtMs: simulator.requests
        .filter(
          (r) => (r.kind === 'send' || r.kind === 'create') && r.status === 429 && inPeriod(r.at),
        )
        .map((r) => r.at - first),
      probe: { ...result, commands },
      lagMs: await intentToArrivalMs(ctx.admin, run.ns.prefix, ids, inputs, simulator),
      errors: await stopAll(fleet).then(() => errorLines(fleet)),
    };
  } finally {
    await run.tearDown();
  }
}
