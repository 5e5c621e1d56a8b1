import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { createProducer } from '../../src/producer/index.js';
import type { BenchContext } from '../context.js';
import { describeProfile, profile, type ProfileSummary } from '../cpu-profile.js';
import { describeCpu, topCommands, watchList } from '../evidence.js';
import { infoNumber, startProbe, totalCalls, type ProbeResult } from '../probes.js';
import type { ScenarioRun, ScenarioResult } from '../report.js';
import { num, repeated, runs, type Repeated } from '../stats.js';
import { baselineQueue, enqueueBaseline, enqueueOurs, followUps } from '../workload.js';

/**
 * Scenario 2: follow-ups per second through `producer.sendMany` in batches of 100, beside bare
 * `queue.addBulk` of the same batches, and one at a time (`producer.send` beside `queue.add`),
 * with no worker running. One call in flight, in this process, so the bench's CPU is the
 * producer's.
 */

type Kind = 'ours' | 'baseline';
type Mode = 'batch' | 'single';

interface Run {
  readonly perSecond: number;
  readonly probe: ProbeResult;
  readonly cpuUsPerFollowUp: number;
  readonly redisCpuUsPerFollowUp: number;
  /** Bytes Redis received per follow-up (INFO stats `total_net_input_bytes`). */
  readonly bytesPerFollowUp: number;
  readonly summary: ProfileSummary;
}

/** Enqueues `inputs` one call per follow-up: `producer.send`, or `queue.add` with addBulk's options. */
async function enqueueSingly(
  kind: Kind,
  producer: ReturnType<typeof createProducer>,
  queue: ReturnType<typeof baselineQueue>,
  inputs: readonly FollowUpInput[],
): Promise<void> {
  for (const input of inputs) {
    if (kind === 'ours') await producer.send(input);
    else await enqueueBaseline(queue, [input]);
  }
}

async function once(ctx: BenchContext, kind: Kind, mode: Mode, n: number): Promise<Run> {
  const ns = await ctx.fresh('enqueue');
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const queue = baselineQueue(ctx, ns);
  try {
    const inputs = followUps(n, 100);
    // One warm-up batch: connections, script loading and JIT are not what this measures.
    if (kind === 'ours') await enqueueOurs(producer, followUps(100, 1, 'warm'));
    else await enqueueBaseline(queue, followUps(100, 1, 'warm'));
    const bytesBefore = await infoNumber(ctx.admin, 'stats', 'total_net_input_bytes');
    const probe = await startProbe(ctx.admin, watchList(ctx.redisPid, []));
    const { value: elapsedMs, summary } = await profile(async () => {
      const started = performance.now();
      if (mode === 'single') await enqueueSingly(kind, producer, queue, inputs);
      else if (kind === 'ours') await enqueueOurs(producer, inputs);
      else await enqueueBaseline(queue, inputs);
      return performance.now() - started;
    }, ['checkFollowUp', 'followUpSchema', 'addJobToTransaction', 'addBulk']);
    const result = await probe.stop();
    const bytes = (await infoNumber(ctx.admin, 'stats', 'total_net_input_bytes')) - bytesBefore;
    const cpuMs = (prefix: string) =>
      result.cpu.find((c) => c.label.startsWith(prefix))?.cpuMs ?? 0;
    return {
      perSecond: (n * 1000) / elapsedMs,
      probe: result,
      cpuUsPerFollowUp: (cpuMs('bench') * 1000) / n,
      redisCpuUsPerFollowUp: (cpuMs('redis') * 1000) / n,
      bytesPerFollowUp: bytes / n,
      summary,
    };
  } finally {
    await Promise.all([producer.close(), queue.close()]);
  }
}

/** Repeats one side's run and reports progress. */
function side(ctx: BenchContext, kind: Kind, mode: Mode, n: number, repeats: number) {
  return repeated(
    repeats,
    async (r) => {
      const run = await once(ctx, kind, mode, n);
      ctx.progress('enqueue', `${kind} ${mode} run ${r + 1}/${repeats}: ${num(run.perSecond)}/s`);
      return run;
    },
    (run) => run.perSecond,
    ctx.mayRepeat,
  );
}

interface Sides {
  readonly ours: Repeated<Run>;
  readonly baseline: Repeated<Run>;
}

function report(n: number, nSingle: number, batch: Sides, single: Sides): ScenarioResult {
  const row = (label: string, side: Repeated<Run>, count: number) => [
    label,
    num(side.median),
    num(side.typical.cpuUsPerFollowUp),
    num(side.typical.redisCpuUsPerFollowUp),
    num(totalCalls(side.typical.probe.commands) / count, 2),
    num(side.typical.bytesPerFollowUp, 0),
  ];
  const ratio = (label: string, { ours, baseline }: Sides) => [
    label,
    num(ours.median / baseline.median, 2),
    num(ours.typical.cpuUsPerFollowUp / baseline.typical.cpuUsPerFollowUp, 2),
    num(ours.typical.redisCpuUsPerFollowUp / baseline.typical.redisCpuUsPerFollowUp, 2),
    '',
    num(ours.typical.bytesPerFollowUp / baseline.typical.bytesPerFollowUp, 2),
  ];
  const evidence = (label: string, run: Run, count: number) =>
    `${label}: ${describeCpu(run.probe)}. Producer profile: ${describeProfile(run.summary)}. ` +
    `Redis commands per follow-up: ${topCommands(run.probe.commands, count)}`;
  return {
    title: 'Enqueue throughput',
    summary:
      `sendMany(100) ${num(batch.ours.median)}/s against addBulk(100) ${num(batch.baseline.median)}/s ` +
      `(${num(batch.ours.median / batch.baseline.median, 2)}×); the producer spends ` +
      `${num(batch.ours.typical.cpuUsPerFollowUp)} µs of CPU per follow-up against ` +
      `${num(batch.baseline.typical.cpuUsPerFollowUp)} µs; one at a time, send() ` +
      `${num(single.ours.median)}/s against add() ${num(single.baseline.median)}/s ` +
      `(${num(single.ours.median / single.baseline.median, 2)}×).`,
    setup:
      `${num(n)} follow-ups (one per agent job, 100 projects) enqueued from the bench process in ` +
      `batches of 100, then ${num(nSingle)} one at a time, one call in flight, no worker running; ` +
      'after one warm-up batch. Ours: `createProducer().sendMany(batch)` and `send(one)` ' +
      '(validation, then one MULTI: SCRIPT LOAD of REGISTER, one EVALSHA of REGISTER for the ' +
      "batch, then BullMQ's add per follow-up; BullMQ's add is loaded once per connection). " +
      'Baseline: `queue.addBulk(batch)` ' +
      'and `queue.addBulk([one])` of jobs carrying the same fields. The producer is CPU-profiled ' +
      'while it runs. Median of up to 3 runs (listed in the notes).',
    tables: [
      {
        columns: [
          '',
          'follow-ups/s',
          'producer CPU per follow-up (µs)',
          'redis-server CPU per follow-up (µs)',
          'Redis commands per follow-up',
          'bytes sent to Redis per follow-up',
        ],
        rows: [
          row('ours: sendMany(100)', batch.ours, n),
          row('baseline: addBulk(100)', batch.baseline, n),
          ratio('sendMany / addBulk', batch),
          row('ours: send(one)', single.ours, nSingle),
          row('baseline: addBulk([one])', single.baseline, nSingle),
          ratio('send / addBulk([one])', single),
        ],
      },
    ],
    limitedBy: [
      evidence('ours, batches', batch.ours.typical, n),
      evidence('baseline, batches', batch.baseline.typical, n),
      evidence('ours, one at a time', single.ours.typical, nSingle),
      evidence('baseline, one at a time', single.baseline.typical, nSingle),
    ],
    notes: [
      `runs (follow-ups/s), batches: ours ${runs(batch.ours.values)}; baseline ${runs(batch.baseline.values)}`,
      `runs (follow-ups/s), one at a time: ours ${runs(single.ours.values)}; baseline ${runs(single.baseline.values)}`,
    ],
  };
}

/** The scenario's run (registered in run.ts). */
export const enqueueScenario: ScenarioRun = async (ctx, n) => {
  const nSingle = ctx.quick ? 1_000 : 3_000;
  const batch = {
    ours: await side(ctx, 'ours', 'batch', n, ctx.repeats),
    baseline: await side(ctx, 'baseline', 'batch', n, ctx.repeats),
  };
  const single = {
    ours: await side(ctx, 'ours', 'single', nSingle, ctx.repeats),
    baseline: await side(ctx, 'baseline', 'single', nSingle, ctx.repeats),
  };
  return report(n, nSingle, batch, single);
};
