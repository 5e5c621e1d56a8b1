import { createProducer } from '../../src/producer/index.js';
import type { Delivery } from '../../src/simulator/index.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext } from '../context.js';
import { describeCpu, watchList } from '../evidence.js';
import { launchRoles, roleEnv } from '../fleet.js';
import { startProbe, type ProbeResult } from '../probes.js';
import type { ScenarioRun, ScenarioResult } from '../report.js';
import { median, ms, num, percentile, runs } from '../stats.js';
import { benchSimulator, enqueueOurs, followUps, waitUntil } from '../workload.js';

/**
 * Scenario 4: enqueue-to-send latency of 100 light projects (one follow-up each) while one heavy
 * project has a backlog, beside the same light load alone. Without a budget nothing reorders the
 * queue; with the production default (100/1h) the heavy project is parked and waits alone.
 */

const LIGHT = 100;
const WORKERS = 2;
const WARM_UP = 200;

interface Variant {
  readonly label: string;
  readonly heavy: number;
  readonly rate: string;
}

interface Run {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Heavy follow-ups not yet sent when the light ones were enqueued. */
  readonly heavyWaiting: number;
  /** Heavy follow-ups sent after the first light one: what overtook the light load. */
  readonly heavyAfterLight: number;
  readonly probe: ProbeResult;
}

function measured(deliveries: readonly Delivery[], enqueuedAt: number, heavyWaiting: number) {
  const light = deliveries.filter((d) => d.projectId.startsWith('light'));
  const firstLight = Math.min(...light.map((d) => d.at));
  const latencies = light.map((d) => d.at - enqueuedAt);
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: Math.max(...latencies),
    heavyWaiting,
    heavyAfterLight: deliveries.filter((d) => d.projectId === 'heavy0' && d.at > firstLight).length,
  };
}

async function once(ctx: BenchContext, variant: Variant): Promise<Run> {
  const ns = await ctx.fresh('fairness');
  const simulator = await benchSimulator();
  const env = roleEnv(ctx, ns, simulator, { SEND_RATE_LIMIT: variant.rate });
  const fleet = await launchRoles(ctx, ns, 'worker', WORKERS, env);
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  try {
    // Warm-up: JIT, sockets and script caches are not what is measured.
    await enqueueOurs(producer, followUps(WARM_UP, WARM_UP, 'warm'));
    await waitUntil(() => simulator.deliveries.length >= WARM_UP, 'warm-up deliveries');
    const watched = watchList(ctx.redisPid, [{ label: 'worker', processes: fleet }]);
    const probe = await startProbe(ctx.admin, watched);
    await enqueueOurs(producer, followUps(variant.heavy, 1, 'heavy'));
    const heavyWaiting = variant.heavy - (simulator.deliveries.length - WARM_UP);
    const enqueuedAt = Date.now();
    await producer.sendMany(followUps(LIGHT, LIGHT, 'light'));
    const lightSent = () =>
      simulator.deliveries.filter((d) => d.projectId.startsWith('light')).length >= LIGHT;
    await waitUntil(lightSent, `${LIGHT} light deliveries`, 120_000, 20);
    const result = await probe.stop();
    return { ...measured(simulator.deliveries, enqueuedAt, heavyWaiting), probe: result };
  } finally {
    await stopAll(fleet);
    await Promise.all([producer.close(), simulator.close()]);
  }
}

async function variantRuns(ctx: BenchContext, v: Variant, repeats: number): Promise<Run[]> {
  const list: Run[] = [];
  let lastMs = 0;
  for (let r = 0; r < repeats && (r === 0 || ctx.mayRepeat(lastMs)); r++) {
    const started = Date.now();
    const run = await once(ctx, v);
    lastMs = Date.now() - started;
    ctx.progress(
      'fairness',
      `${v.label} run ${r + 1}/${repeats}: p50 ${ms(run.p50)}, p99 ${ms(run.p99)}, ` +
        `${num(run.heavyWaiting, 0)} heavy waiting`,
    );
    list.push(run);
  }
  return list;
}

const COLUMNS = [
  'light follow-ups',
  'p50',
  'p99',
  'max',
  'heavy still queued when the light came',
  'heavy sent after the first light one',
];

/** One row: the medians over a variant's runs. */
function row(v: Variant, list: readonly Run[]): string[] {
  const med = (pick: (r: Run) => number) => median(list.map(pick));
  return [
    v.label,
    ms(med((r) => r.p50)),
    ms(med((r) => r.p99)),
    ms(med((r) => r.max)),
    num(
      med((r) => r.heavyWaiting),
      0,
    ),
    num(
      med((r) => r.heavyAfterLight),
      0,
    ),
  ];
}

/** The run whose p50 is the median one. */
function typical(list: readonly Run[]): Run {
  return [...list].sort((a, b) => a.p50 - b.p50)[Math.floor((list.length - 1) / 2)] as Run;
}

const QUEUE_ORDER =
  'Queue order. BullMQ serves the dispatch queue first in, first out; with no budget nothing ' +
  'sets the heavy project apart, so the light follow-ups wait until the backlog ahead of them has ' +
  'drained at the dispatch rate of scenario 1 (the last column: hardly any heavy follow-up is ' +
  'sent after the first light one). With a budget, each heavy follow-up over budget costs one ' +
  'ACQUIRE and a park (moveToDelayed) instead of a send, and the light ones wait only for those.';

function report(heavy: number, results: readonly [Variant, Run[]][]): ScenarioResult {
  return {
    title: 'Fairness',
    summary: `light follow-ups' p50 / p99 enqueue-to-send: ${results
      .map(
        ([v, list]) =>
          `${v.label} ${ms(median(list.map((r) => r.p50)))} / ${ms(median(list.map((r) => r.p99)))}`,
      )
      .join('; ')}.`,
    setup:
      `${LIGHT} light projects with one follow-up each, enqueued in one sendMany right after a ` +
      `heavy project's ${num(heavy)} follow-ups (one per agent job) were enqueued, with ${WORKERS} ` +
      `worker processes (concurrency 64) already running and warmed up by ${WARM_UP} follow-ups. ` +
      'Latency = simulator arrival time minus the time the light batch was enqueued. Medians of ' +
      'up to 3 runs (listed in the notes; a repeat is skipped when it would not fit the 10-minute ' +
      'budget).',
    tables: [{ columns: COLUMNS, rows: results.map(([v, list]) => row(v, list)) }],
    limitedBy: [
      QUEUE_ORDER,
      ...results.map(([v, list]) => `${v.label}: ${describeCpu(typical(list).probe)}`),
    ],
    notes: results.map(
      ([v, list]) =>
        `${v.label}: p50 per run ${runs(
          list.map((r) => r.p50),
          ms,
        )}`,
    ),
  };
}

/** The scenario's run (registered in run.ts). */
export const fairnessScenario: ScenarioRun = async (ctx, heavy) => {
  const repeats = ctx.repeats;
  const variants: Variant[] = [
    { label: 'light load alone', heavy: 0, rate: '1000000/1s' },
    { label: `beside a backlog of ${num(heavy)}, no budget`, heavy, rate: '1000000/1s' },
    { label: `beside a backlog of ${num(heavy)}, SEND_RATE_LIMIT=100/1h`, heavy, rate: '100/1h' },
  ];
  const results: [Variant, Run[]][] = [];
  for (const v of variants) results.push([v, await variantRuns(ctx, v, repeats)]);
  return report(heavy, results);
};
