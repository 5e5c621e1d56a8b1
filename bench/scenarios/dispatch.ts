import type { BenchContext } from '../context.js';
import { describeProfile } from '../cpu-profile.js';
import { describeCpu, topCommands } from '../evidence.js';
import type { ScenarioRun } from '../report.js';
import { median, num, repeated, runs } from '../stats.js';
import { CONCURRENCY, once, profiledDrain, PROJECTS, WARM_UP, type Kind } from './dispatch-run.js';

/**
 * Scenario 1: follow-ups per second, ours beside a bare BullMQ worker that only POSTs, with 1 and
 * 4 worker processes. Two figures per run: end to end (from the first enqueue, with the workers
 * running, to the simulator's record of the last delivery) and the drain rate of a backlog that
 * was enqueued while the queue was paused (the workers alone).
 */

/** Runs one configuration; returns its medians, the evidence of its median run and a note. */
async function configuration(ctx: BenchContext, kind: Kind, workers: number, n: number) {
  const repeats = ctx.repeats;
  let drains: number[] = [];
  let cpus: number[] = [];
  const result = await repeated(
    repeats,
    async (r) => {
      const run = await once(ctx, kind, workers, n);
      const errors = run.errors.length > 0 ? `; ERRORS: ${run.errors.join('; ')}` : '';
      ctx.progress(
        'dispatch',
        `${kind} ×${workers} run ${r + 1}/${repeats}: end to end ${num(run.endToEnd)}/s, ` +
          `drain ${num(run.drain)}/s${errors}`,
      );
      drains = [...drains, run.drain];
      cpus = [...cpus, run.drainWorkerCpuUs];
      return run;
    },
    (run) => run.endToEnd,
    ctx.mayRepeat,
  );
  const { typical } = result;
  const label = `${kind}, ${workers} process${workers > 1 ? 'es' : ''}`;
  return {
    endToEnd: result.median,
    drain: median(drains),
    drainCpuUs: median(cpus),
    note:
      `${label}: end to end ${runs(result.values)}/s, drain ${runs(drains)}/s, worker CPU per ` +
      `follow-up while draining ${runs(cpus)} µs; in the median run ` +
      `the enqueue of ${num(n)} ended after ${num(typical.enqueueMs)} ms of ${num(typical.endToEndMs)} ms`,
    evidence: [
      `${label}, end to end: ${describeCpu(typical.probe)}. Redis commands per follow-up: ` +
        topCommands(typical.probe.commands, n),
      `${label}, drain: ${describeCpu(typical.drainProbe)}`,
    ],
  };
}

type Configuration = Awaited<ReturnType<typeof configuration>>;

function row(workers: number, ours: Configuration, baseline: Configuration): string[] {
  return [
    String(workers),
    num(ours.endToEnd),
    num(baseline.endToEnd),
    num(ours.endToEnd / baseline.endToEnd, 2),
    num(ours.drain),
    num(baseline.drain),
    num(ours.drain / baseline.drain, 2),
    `${num(ours.drainCpuUs)} / ${num(baseline.drainCpuUs)} (${num(ours.drainCpuUs / baseline.drainCpuUs, 2)}×)`,
  ];
}

const SETUP =
  `follow-ups, one per agent job, over ${PROJECTS} projects, to worker processes of concurrency ` +
  `${CONCURRENCY}, after ${WARM_UP} warm-up follow-ups. End to end: enqueued in batches of 100 (one ` +
  'in flight, from the bench process, which also runs the simulator) while the workers run, from ' +
  'the first enqueue to the simulator recording the last delivery. Drain: the same number enqueued ' +
  'into the paused queue, then timed from `queue.resume()`. Ours: `node --import tsx src/cli.ts ' +
  'worker`, SEND_RATE_LIMIT=1000000/1s (the budget never waits), no poller (scenarios 5 and 7 cost ' +
  'the tracking). Baseline: bench/baseline-worker.ts, a bare BullMQ Worker that POSTs the same body ' +
  'with undici. Fresh Redis data and processes per run; one more drain per side with the worker ' +
  'under `--cpu-prof` shows where its CPU goes.';

const COLUMNS = [
  'worker processes',
  'end to end: ours /s',
  'baseline /s',
  'ours / baseline',
  'drain: ours /s',
  'baseline /s',
  'ours / baseline',
  'drain: worker CPU per follow-up, ours / baseline (µs)',
];

/** The scenario's run (registered in run.ts). */
export const dispatchScenario: ScenarioRun = async (ctx, n) => {
  const rows: string[][] = [];
  const limitedBy: string[] = [];
  const notes: string[] = [];
  const headline: string[] = [];
  for (const workers of [1, 4]) {
    const ours = await configuration(ctx, 'ours', workers, n);
    const baseline = await configuration(ctx, 'baseline', workers, n);
    rows.push(row(workers, ours, baseline));
    headline.push(
      `${workers} worker process${workers > 1 ? 'es' : ''}: ${num(ours.drain)}/s against ` +
        `${num(baseline.drain)}/s (${num(ours.drain / baseline.drain, 2)}×) draining a backlog, ` +
        `${num(ours.endToEnd)}/s against ${num(baseline.endToEnd)}/s end to end, ` +
        `${num(ours.drainCpuUs)} µs of worker CPU per follow-up against ${num(baseline.drainCpuUs)} µs`,
    );
    limitedBy.push(...ours.evidence, ...baseline.evidence);
    notes.push(ours.note, baseline.note);
  }
  for (const kind of ['ours', 'baseline'] as const) {
    const profile = await profiledDrain(ctx, kind, n);
    ctx.progress('dispatch', `${kind} worker profiled`);
    limitedBy.push(
      `${kind}, 1 process, CPU profile of the worker while draining: ${describeProfile(profile, 6)}`,
    );
  }
  return {
    title: 'Dispatch throughput',
    summary: `ours against bare BullMQ: ${headline.join('; ')}.`,
    setup:
      `${num(n)} ${SETUP} Median of up to ${ctx.repeats} runs (listed in the notes; a repeat ` +
      'is skipped when it would not fit the 10-minute budget).',
    tables: [{ columns: COLUMNS, rows }],
    limitedBy,
    notes: [
      'One follow-up per agent job: a lane releases its next follow-up only when the previous ' +
        "one's run ends, so follow-ups to one agent job go at the pace of the agent, not of the service.",
      ...notes,
    ],
  };
};
