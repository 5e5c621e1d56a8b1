/**
 * `npm run bench`: runs every scenario against a private redis-server and the bundled simulator,
 * prints progress, and writes BENCHMARKS.md.
 *
 *   npm run bench                         all scenarios, full length; writes BENCHMARKS.md
 *   npm run bench -- --quick              shorter runs, one repetition (development)
 *   npm run bench -- --only dispatch,memory
 *   npm run bench -- --out FILE           write the report to FILE instead
 *
 * A partial or quick run prints its report and writes a file only when `--out` names one, so
 * BENCHMARKS.md always holds a complete, full-length run.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createContext } from './context.js';
import { describeMachine } from './machine.js';
import { renderReport, type Scenario, type ScenarioResult } from './report.js';
import { Schedule } from './schedule.js';
import { budgetScenario } from './scenarios/budget.js';
import { clusterScenario } from './scenarios/cluster.js';
import { dispatchScenario } from './scenarios/dispatch.js';
import { durabilityScenario } from './scenarios/durability.js';
import { enqueueScenario } from './scenarios/enqueue.js';
import { fairnessScenario } from './scenarios/fairness.js';
import { learnedReadsScenario } from './scenarios/learned-reads.js';
import { memoryScenario } from './scenarios/memory.js';
import { pollerScenario } from './scenarios/poller.js';
import { quickRunScenario } from './scenarios/quick-run.js';
import { redisWorkScenario } from './scenarios/redis-work.js';
import { repairScenario } from './scenarios/repair.js';
import { tracingScenario } from './scenarios/tracing.js';

/** Every scenario, in the report's order: its `--only` name, its time budget and its load. */
const SCENARIOS: readonly Scenario[] = [
  { id: 'dispatch', minimumMs: 90_000, size: [2_000, 3_000], run: dispatchScenario },
  {
    id: 'enqueue',
    // All its runs (3 of each of its 4 parts): it calibrates the schedule (see `calibrates`).
    minimumMs: 45_000,
    size: [2_000, 10_000],
    run: enqueueScenario,
    calibrates: true,
  },
  { id: 'budget', minimumMs: 120_000, size: [20_000, 60_000], run: budgetScenario },
  { id: 'fairness', minimumMs: 50_000, size: [2_000, 10_000], run: fairnessScenario },
  { id: 'poller', minimumMs: 45_000, size: [2_000, 10_000], run: pollerScenario },
  { id: 'quick-run', minimumMs: 40_000, size: [10, 30], run: quickRunScenario },
  // Four rounds of runs up to 2.5 min compressed 5×: about 2 min, the longest runs' own time.
  { id: 'learned-reads', minimumMs: 150_000, size: [4, 20], run: learnedReadsScenario },
  { id: 'memory', minimumMs: 25_000, size: [2_000, 10_000], run: memoryScenario },
  { id: 'redis-work', minimumMs: 35_000, size: [500, 2_000], run: redisWorkScenario },
  { id: 'repair', minimumMs: 90_000, size: [20_000, 200_000], run: repairScenario },
  { id: 'tracing', minimumMs: 30_000, size: [500, 2_000], run: tracingScenario },
  { id: 'cluster', minimumMs: 120_000, size: [1_000, 2_000], run: clusterScenario },
  // 12.7 to 18.1 s in five full benches of 2026-11-24: 60 s covers a machine 3 times slower.
  { id: 'durability', minimumMs: 60_000, size: [400, 2_000], run: durabilityScenario },
];

const DEFAULT_OUT = fileURLToPath(new URL('../docs/reports/benchmarks.md', import.meta.url));

function options() {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      quick: { type: 'boolean', default: false },
      out: { type: 'string' },
    },
  });
  const wanted = values.only?.split(',').map((s) => s.trim());
  const unknown = wanted?.filter((id) => !SCENARIOS.some((s) => s.id === id)) ?? [];
  if (unknown.length > 0) {
    throw new Error(
      `unknown scenario ${unknown.join(', ')}; choose from ${SCENARIOS.map((s) => s.id).join(', ')}`,
    );
  }
  const scenarios = wanted ? SCENARIOS.filter((s) => wanted.includes(s.id)) : SCENARIOS;
  const complete = !wanted && !values.quick;
  return {
    scenarios,
    quick: values.quick,
    out: values.out ?? (complete ? DEFAULT_OUT : undefined),
  };
}

async function main(): Promise<void> {
  const { scenarios, quick, out } = options();
  const startedAt = new Date();
  const started = performance.now();
  // The calibrating scenario runs first; the report keeps the registry's order.
  const runOrder = [
    ...scenarios.filter((s) => s.calibrates),
    ...scenarios.filter((s) => !s.calibrates),
  ];
  const schedule = new Schedule(new Map(runOrder.map((s) => [s.id, s.minimumMs])), {
    calibrating: runOrder.find((s) => s.calibrates)?.id,
  });
  const ctx = await createContext(quick, schedule);
  const byId = new Map<string, ScenarioResult>();
  try {
    ctx.progress(
      'bench',
      `Redis ${ctx.redisVersion} at ${ctx.redisUrl}; ${scenarios.length} scenarios`,
    );
    for (const scenario of runOrder) {
      const t = performance.now();
      schedule.enter(scenario.id);
      ctx.progress(scenario.id, 'starting');
      byId.set(scenario.id, await scenario.run(ctx, scenario.size[quick ? 0 : 1]));
      const tookMs = performance.now() - t;
      let done = `done in ${(tookMs / 1000).toFixed(1)} s`;
      // A quick run repeats nothing and is shorter than the minimum: it says nothing of the pace.
      if (scenario.calibrates && !quick) {
        schedule.calibrate(scenario.id, tookMs);
        done += `; the scenarios after it are expected at ${schedule.pace.toFixed(2)}× their minimum`;
      }
      ctx.progress(scenario.id, done);
    }
  } finally {
    await ctx.close();
  }
  const totalMs = performance.now() - started;
  const argv = process.argv.slice(2);
  const command = `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`;
  const report = renderReport(
    {
      machine: describeMachine(),
      redisVersion: ctx.redisVersion,
      startedAt,
      totalMs,
      command,
      quick,
    },
    scenarios.flatMap((s) => byId.get(s.id) ?? []),
  );
  if (out) writeFileSync(out, report);
  else process.stdout.write(`\n${report}`);
  ctx.progress('bench', `total ${(totalMs / 1000).toFixed(1)} s${out ? `; wrote ${out}` : ''}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
