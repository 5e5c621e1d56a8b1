import { Queue } from 'bullmq';
import { loadConfig } from '../../src/config/index.js';
import { MIN_PAGE, repairPage, sweepLostJobs } from '../../src/poller/repair.js';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { DispatchStore } from '../../src/store/store.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import type { BenchContext } from '../context.js';
import type { ScenarioResult, ScenarioRun } from '../report.js';
import { ms, num, percentile } from '../stats.js';
import { batches, followUps } from '../workload.js';

/**
 * The repair sweep's pass over a backlog of queued follow-ups (no worker runs, so every one stays
 * open), once with a fixed page of {@link MIN_PAGE} a tick and once with the page that follows the
 * backlog ({@link repairPage} at the default REPAIR_GRACE and POLL_INTERVAL), on the same data.
 * Measured: ticks per pass, and each tick's sweep time; the pass time at the default
 * POLL_INTERVAL is the ticks times the interval (the sweep runs once a tick).
 */

const DEFAULTS = loadConfig({ AGENT_API_KEY: 'x', REDIS_URL: 'redis://localhost' });

interface Pass {
  readonly ticks: number;
  readonly tickMs: readonly number[];
}

interface Backlog {
  readonly n: number;
  readonly fixed: Pass;
  readonly following: Pass;
}

/** One pass from its start to its end, a sweep call per tick, each timed. */
async function pass(
  ctx: BenchContext,
  sweep: Parameters<typeof sweepLostJobs>[0],
  gate: string,
  pageFor: (open: number, ticksLeft: number) => number,
): Promise<Pass> {
  await ctx.admin.del(gate);
  const tickMs: number[] = [];
  // The ticks a pass has at the defaults, counted down by the bench's own calls (which run back
  // to back, not a POLL_INTERVAL apart, so the sweep's clock would count none).
  const ticksOfGrace = Math.floor(DEFAULTS.repairGraceMs / DEFAULTS.pollIntervalMs);
  for (let ended = false; !ended;) {
    const started = performance.now();
    const left = Math.max(1, ticksOfGrace - tickMs.length);
    ended = (await sweepLostJobs(sweep, (open) => pageFor(open, left))).passEnded;
    tickMs.push(performance.now() - started);
  }
  return { ticks: tickMs.length, tickMs };
}

async function measure(ctx: BenchContext, n: number): Promise<Backlog> {
  const ns = await ctx.fresh('repair');
  const keys = keysFor(ns.prefix);
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const queue = new Queue(QUEUE_NAMES.dispatch, { connection: ctx.connection, prefix: ns.prefix });
  try {
    for (const batch of batches(followUps(n, 100), 1_000)) await producer.sendMany(batch);
    // The sweep looks only at dispatches older than REPAIR_GRACE: 1 s, its least.
    const config = loadConfig({
      AGENT_API_KEY: 'x',
      REDIS_URL: ctx.redisUrl,
      DISPATCH_PREFIX: ns.prefix,
      REPAIR_GRACE: '1s',
    });
    await new Promise((r) => setTimeout(r, 1_100));
    const store = new DispatchStore(ctx.admin, keys, {
      eventsStream: ns.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
    });
    const sweep = {
      config,
      store,
      queue,
      metrics: createMetrics(),
      logger: createLogger('silent'),
    };
    const fixed = await pass(ctx, sweep, keys.repairGate, () => MIN_PAGE);
    const following = await pass(ctx, sweep, keys.repairGate, (open, left) =>
      repairPage(open, DEFAULTS, left),
    );
    ctx.progress('repair', `${num(n, 0)} open: ${fixed.ticks} ticks, then ${following.ticks}`);
    return { n, fixed, following };
  } finally {
    await Promise.all([producer.close(), queue.close()]);
  }
}

const passTime = (p: Pass) => `${ms(p.ticks * DEFAULTS.pollIntervalMs)} (${p.ticks} ticks)`;
const tickTime = (p: Pass) => `${ms(percentile(p.tickMs, 50))} / ${ms(Math.max(...p.tickMs))}`;

function report(runs: readonly Backlog[]): ScenarioResult {
  const rows = runs.flatMap((r) => [
    [`${num(r.n, 0)} open`, `fixed ${MIN_PAGE}`, passTime(r.fixed), tickTime(r.fixed)],
    [`${num(r.n, 0)} open`, 'follows the backlog', passTime(r.following), tickTime(r.following)],
  ]);
  const last = runs.at(-1);
  return {
    title: 'Repair sweep pass',
    summary: last
      ? `a repair pass over ${num(last.n, 0)} open follow-ups takes ${passTime(last.following)} ` +
        `at the default POLL_INTERVAL, against ${passTime(last.fixed)} with a fixed page.`
      : 'no run',
    setup:
      `Backlogs of queued follow-ups (one per agent job, 100 projects, no worker), each swept ` +
      `once with a fixed page of ${MIN_PAGE} a tick and once with the page that follows the ` +
      `backlog at the default REPAIR_GRACE (${ms(DEFAULTS.repairGraceMs)}) and POLL_INTERVAL ` +
      `(${ms(DEFAULTS.pollIntervalMs)}); the sweep is called back to back, one call per tick.`,
    tables: [{ columns: ['backlog', 'page', 'pass time (ticks)', 'tick p50 / max'], rows }],
    limitedBy: [
      'The page cap: past the backlog it reads within one REPAIR_GRACE, a pass grows with the ' +
        'backlog again. A tick reads at most the cap, in parts of 1,000 (a scan of lanes of one, ' +
        'a pipeline of HMGETs and one of three reads per queued one, each).',
    ],
    notes: ['Pass time = ticks × POLL_INTERVAL: the sweep runs once per poll tick.'],
  };
}

/** The scenario's run (registered in run.ts): a backlog of `n / 10`, then one of `n`. */
export const repairScenario: ScenarioRun = async (ctx, n) =>
  report([await measure(ctx, Math.round(n / 10)), await measure(ctx, n)]);
