import { createProducer } from '../../src/producer/index.js';
import type { BenchContext } from '../context.js';
import { describeProfile, profile, type ProfileSummary } from '../cpu-profile.js';
import { describeCpu, topCommands, watchList } from '../evidence.js';
import { startProbe, totalCalls, type ProbeResult } from '../probes.js';
import type { Scenario, ScenarioResult } from '../report.js';
import { num, repeated, runs, type Repeated } from '../stats.js';
import { baselineQueue, enqueueBaseline, enqueueOurs, followUps } from '../workload.js';

/**
 * Scenario 2: follow-ups per second through `producer.sendMany` in batches of 100, beside bare
 * `queue.addBulk` of the same batches, with no worker running. One batch in flight, in this
 * process, so the bench's CPU is the producer's.
 */

type Kind = 'ours' | 'baseline';

interface Run {
  readonly perSecond: number;
  readonly probe: ProbeResult;
  readonly cpuUsPerFollowUp: number;
  readonly summary: ProfileSummary;
}

async function once(ctx: BenchContext, kind: Kind, n: number): Promise<Run> {
  const ns = await ctx.fresh('enqueue');
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const queue = baselineQueue(ctx, ns);
  try {
    const inputs = followUps(n, 100);
    // One warm-up batch: connections, script loading and JIT are not what this measures.
    if (kind === 'ours') await enqueueOurs(producer, followUps(100, 1, 'warm'));
    else await enqueueBaseline(queue, followUps(100, 1, 'warm'));
    const probe = await startProbe(ctx.admin, watchList(ctx.redisPid, []));
    const { value: elapsedMs, summary } = await profile(async () => {
      const started = performance.now();
      if (kind === 'ours') await enqueueOurs(producer, inputs);
      else await enqueueBaseline(queue, inputs);
      return performance.now() - started;
    }, ['checkFollowUp', 'followUpSchema', 'addJobToTransaction', 'addBulk']);
    const result = await probe.stop();
    const benchCpu = result.cpu.find((c) => c.label.startsWith('bench'))?.cpuMs ?? 0;
    return {
      perSecond: (n * 1000) / elapsedMs,
      probe: result,
      cpuUsPerFollowUp: (benchCpu * 1000) / n,
      summary,
    };
  } finally {
    await Promise.all([producer.close(), queue.close()]);
  }
}

/** Repeats one side's run and reports progress. */
function side(ctx: BenchContext, kind: Kind, n: number, repeats: number) {
  return repeated(
    repeats,
    async (r) => {
      const run = await once(ctx, kind, n);
      ctx.progress('enqueue', `${kind} run ${r + 1}/${repeats}: ${num(run.perSecond)}/s`);
      return run;
    },
    (run) => run.perSecond,
    ctx.mayRepeat,
  );
}

function report(n: number, ours: Repeated<Run>, baseline: Repeated<Run>): ScenarioResult {
  const row = (label: string, side: Repeated<Run>) => [
    label,
    num(side.median),
    num(side.typical.cpuUsPerFollowUp),
    num(totalCalls(side.typical.probe.commands) / n, 2),
  ];
  const evidence = (label: string, run: Run) =>
    `${label}: ${describeCpu(run.probe)}. Producer profile: ${describeProfile(run.summary)}. ` +
    `Redis commands per follow-up: ${topCommands(run.probe.commands, n)}`;
  return {
    title: 'Enqueue throughput',
    summary:
      `sendMany(100) ${num(ours.median)}/s against addBulk(100) ${num(baseline.median)}/s ` +
      `(${num(ours.median / baseline.median, 2)}×); the producer spends ` +
      `${num(ours.typical.cpuUsPerFollowUp)} µs of CPU per follow-up against ` +
      `${num(baseline.typical.cpuUsPerFollowUp)} µs.`,
    setup:
      `${num(n)} follow-ups (one per agent job, 100 projects) enqueued from the bench process in ` +
      'batches of 100, one batch in flight, no worker running; after one warm-up batch. Ours: ' +
      '`createProducer().sendMany(batch)` (validation, then one MULTI: SCRIPT LOAD of both scripts, ' +
      'EVALSHA register + BullMQ add per follow-up). Baseline: `queue.addBulk(batch)` of jobs carrying the same fields. The ' +
      'producer is CPU-profiled while it runs. Median of up to 3 runs (listed in the notes).',
    tables: [
      {
        columns: [
          '',
          'follow-ups/s',
          'producer CPU per follow-up (µs)',
          'Redis commands per follow-up',
        ],
        rows: [
          row('ours: sendMany(100)', ours),
          row('baseline: addBulk(100)', baseline),
          ['ours / baseline', num(ours.median / baseline.median, 2), '', ''],
        ],
      },
    ],
    limitedBy: [evidence('ours', ours.typical), evidence('baseline', baseline.typical)],
    notes: [`runs (follow-ups/s): ours ${runs(ours.values)}; baseline ${runs(baseline.values)}`],
  };
}

/** Scenario 2. */
export const enqueueScenario: Scenario = {
  id: 'enqueue',
  minimumMs: 15_000,
  async run(ctx) {
    const n = ctx.quick ? 2_000 : 10_000;
    const ours = await side(ctx, 'ours', n, ctx.repeats);
    const baseline = await side(ctx, 'baseline', n, ctx.repeats);
    return report(n, ours, baseline);
  },
};
