import { createProducer } from '../../src/producer/index.js';
import { loadConfig } from '../../src/config/index.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext } from '../context.js';
import { launchRoles, roleEnv } from '../fleet.js';
import type { ScenarioResult, ScenarioRun } from '../report.js';
import { ms, num, percentile } from '../stats.js';
import { benchSimulator, waitUntil } from '../workload.js';

/**
 * Quick runs: the job shows the previous run's `completed` for 500 ms after the send, is active
 * for 1 s, and ends 1.5 s after the send. Follow-ups are sent one at a time at random moments, so
 * they fall anywhere between two poll ticks; one worker and one poller run with the service's
 * default poll settings. Measured: run end → event, and GETs per follow-up.
 */

const STALE_MS = 500;
const WORK_MS = 1_000;
/** ACTIVE_GRACE only bounds the run: a run never seen active ends when it has passed. */
const ACTIVE_GRACE_MS = 20_000;

interface QuickRun {
  readonly n: number;
  readonly latencies: readonly number[];
  readonly gets: readonly number[];
  readonly graceEnded: number;
}

async function measure(ctx: BenchContext, n: number): Promise<QuickRun> {
  const ns = await ctx.fresh('quick');
  const simulator = await benchSimulator({ workTimeMs: WORK_MS, staleTerminalMs: STALE_MS });
  const env = roleEnv(ctx, ns, simulator, { ACTIVE_GRACE: `${ACTIVE_GRACE_MS / 1000}s` });
  const processes = [
    ...(await launchRoles(ctx, ns, 'poller', 1, env)),
    ...(await launchRoles(ctx, ns, 'worker', 1, env)),
  ];
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  try {
    for (let i = 0; i < n; i++) {
      simulator.seedJob('quick', `j${i}`, { status: 'completed' });
      await producer.send({ projectId: 'quick', jobId: `j${i}`, prompt: `quick #${i}` });
      await new Promise((r) => setTimeout(r, 150 + Math.random() * 700));
    }
    const events = async () => (await ctx.admin.xlen(ns.eventsStream)) >= n;
    await waitUntil(events, `${n} events`, ACTIVE_GRACE_MS + 60_000, 100);
    const sentAt = new Map(simulator.deliveries.map((d) => [d.jobId, d.at]));
    const latencies: number[] = [];
    const gets: number[] = [];
    let graceEnded = 0;
    for (const [id, fields] of await ctx.admin.xrange(ns.eventsStream, '-', '+')) {
      const jobId = fields[fields.indexOf('jobId') + 1] ?? '';
      const runEnd = (sentAt.get(jobId) ?? Number.NaN) + STALE_MS + WORK_MS;
      const latency = Number(id.split('-')[0]) - runEnd;
      latencies.push(latency);
      if (latency >= ACTIVE_GRACE_MS - STALE_MS - WORK_MS) graceEnded += 1;
      gets.push(simulator.countGets('quick', jobId));
    }
    return { n, latencies, gets, graceEnded };
  } finally {
    await stopAll(processes);
    await Promise.all([producer.close(), simulator.close()]);
  }
}

function report(r: QuickRun): ScenarioResult {
  const defaults = loadConfig({ AGENT_API_KEY: 'x', REDIS_URL: 'redis://localhost' });
  const mean = r.gets.reduce((a, b) => a + b, 0) / Math.max(1, r.gets.length);
  return {
    title: 'Quick runs',
    summary:
      `a run that ends 1.5 s after its send (stale status first): run end → event p50 ` +
      `${ms(percentile(r.latencies, 50))}, max ${ms(Math.max(...r.latencies))}; ` +
      `${num(r.graceEnded, 0)} of ${num(r.n, 0)} waited out ACTIVE_GRACE.`,
    setup:
      `${num(r.n, 0)} follow-ups, each to its own agent job, sent one at a time 150–850 ms apart ` +
      `(so they fall anywhere between two poll ticks). The simulator shows the previous run's ` +
      `\`completed\` for ${STALE_MS} ms after the send, then the run is active for ${WORK_MS} ms. ` +
      `One worker and one poller process with the default poll settings (POLL_INTERVAL ` +
      `${ms(defaults.pollIntervalMs)}, POLL_MIN_INTERVAL ${ms(defaults.pollMinIntervalMs)}), ` +
      `ACTIVE_GRACE=${ACTIVE_GRACE_MS / 1000}s instead of 2 min only to bound the run. Measured once.`,
    tables: [
      {
        columns: ['figure', 'value'],
        rows: [
          ['run end → event, p50', ms(percentile(r.latencies, 50))],
          ['run end → event, p99', ms(percentile(r.latencies, 99))],
          ['run end → event, max', ms(Math.max(...r.latencies))],
          [
            'waited out ACTIVE_GRACE (never seen active)',
            `${num(r.graceEnded, 0)} of ${num(r.n, 0)}`,
          ],
          ['GETs per follow-up, mean / max', `${num(mean, 1)} / ${num(Math.max(...r.gets), 0)}`],
        ],
      },
    ],
    limitedBy: [
      'The read schedule: a run is seen active only by a read inside its 1 s active window, and ' +
        'its event follows the first read after it ended. Reads start POLL_MIN_INTERVAL after ' +
        'the send and grow by half; how close to its due time a read happens is set by the poll ' +
        'tick (a tick reads what falls due until the next one).',
    ],
    notes: ["Run end = the simulator's delivery time + 1.5 s; event time = the stream entry id."],
  };
}

/** The scenario's run (registered in run.ts). */
export const quickRunScenario: ScenarioRun = async (ctx, n) => report(await measure(ctx, n));
