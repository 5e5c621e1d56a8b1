import { createHash } from 'node:crypto';
import { createProducer } from '../../src/producer/index.js';
import type { Simulator } from '../../src/simulator/index.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext, Namespace } from '../context.js';
import { launchRoles, roleEnv } from '../fleet.js';
import { benchSimulator, waitUntil } from '../workload.js';

/**
 * One run of the learned-reads scenario: the same projects, jobs and run lengths on two fleets at
 * once, one with POLL_LEARN=false (the growing schedule), one with it on, against one simulator.
 * Time is compressed {@link COMPRESSION} times (run lengths and poll settings alike), so runs of
 * minutes fit in the bench's budget.
 */

/**
 * Every duration of the scenario is this many times shorter than the real one it stands for: 5,
 * or `BENCH_LEARNED_COMPRESSION` (1: in real time, about 13 minutes).
 */
export const COMPRESSION = compressionOf(process.env['BENCH_LEARNED_COMPRESSION']);

function compressionOf(value: string | undefined): number {
  if (value === undefined || value === '') return 5;
  const n = Number(value);
  if (!(n >= 1 && n <= 20))
    throw new Error(`BENCH_LEARNED_COMPRESSION must be 1 to 20, not ${value}`);
  return n;
}
const real = (ms: number) => ms / COMPRESSION;

/** A project's runs: `regular` ones within ±10 % of their mean, `irregular` ones anywhere. */
export interface ProjectRuns {
  readonly name: string;
  readonly regular: boolean;
  /** A run's length (real ms) from a uniform draw `u` in [0, 1). */
  readonly length: (u: number) => number;
}

/** Means of 1, 1.5 and 2 minutes ±10 %; a uniform 20 s–2.5 min; a mix of 30 s and 2 min. */
export const PROJECTS: readonly ProjectRuns[] = [
  { name: 'reg-60s', regular: true, length: (u) => 60_000 * (0.9 + 0.2 * u) },
  { name: 'reg-90s', regular: true, length: (u) => 90_000 * (0.9 + 0.2 * u) },
  { name: 'reg-120s', regular: true, length: (u) => 120_000 * (0.9 + 0.2 * u) },
  { name: 'irr-uniform', regular: false, length: (u) => 20_000 + 130_000 * u },
  {
    name: 'irr-mixed',
    regular: false,
    length: (u) => (u < 0.5 ? 30_000 : 120_000) * (0.8 + u / 2.5),
  },
];

/** The poll settings of both fleets, compressed like the runs (real: 500 ms, 1 m, 5 s, 2 m). */
const POLL_ENV = {
  POLL_MIN_INTERVAL: `${real(500)}ms`,
  POLL_MAX_INTERVAL: `${real(60_000)}ms`,
  POLL_INTERVAL: `${real(5_000)}ms`,
  ACTIVE_GRACE: `${real(120_000)}ms`,
};

/** One follow-up as measured: its side, project, round, run end → event, in real ms. */
export interface Measured {
  readonly learn: boolean;
  readonly project: ProjectRuns;
  /** 0: the job's first follow-up (no history yet for the first jobs of its project). */
  readonly round: number;
  readonly lateMs: number;
}

/** What one run measured: each follow-up, and GETs by side and project (`on-reg-60s`), by round. */
export interface LearnedRun {
  readonly followUps: readonly Measured[];
  readonly gets: ReadonlyMap<string, readonly number[]>;
}

/** A uniform draw in [0, 1), the same for both sides: from the base project, job and round. */
function draw(base: string, jobId: string, round: number): number {
  const hash = createHash('sha256').update(`${base}/${jobId}/${round}`).digest();
  return hash.readUInt32BE(0) / 2 ** 32;
}

/** Side `off-` or `on-` of a project's name, and its base name. */
const sideOf = (projectId: string) => ({
  learn: projectId.startsWith('on-'),
  base: projectId.replace(/^(on|off)-/, ''),
});

/** Runs `jobs` agent jobs per project, `rounds` follow-ups each, on both fleets at once. */
export async function measureLearned(
  ctx: BenchContext,
  jobs: number,
  rounds: number,
): Promise<LearnedRun> {
  const base = await ctx.fresh('learned');
  const sides: Namespace[] = [
    { prefix: `${base.prefix}-off`, eventsStream: `${base.eventsStream}-off` },
    { prefix: `${base.prefix}-on`, eventsStream: `${base.eventsStream}-on` },
  ];
  // Each run's end and start (epoch ms), by `project/job`, in the order the runs started.
  const ends = new Map<string, number[]>();
  const starts = new Map<string, number[]>();
  const byName = new Map(PROJECTS.map((p) => [p.name, p]));
  const simulator = await benchSimulator({
    workTimeMs: (projectId, jobId) => {
      const { base: name } = sideOf(projectId);
      const key = `${projectId}/${jobId}`;
      const list = ends.get(key) ?? [];
      const begun = starts.get(key) ?? [];
      const round = list.length;
      const runMs = real(byName.get(name)?.length(draw(name, jobId, round)) ?? 60_000);
      list.push(Date.now() + runMs);
      begun.push(Date.now());
      ends.set(key, list);
      starts.set(key, begun);
      // The run ends when the simulator's timer (set next, for the same time) turns it terminal:
      // on a busy machine that fires late, and a read in between still sees the run active.
      setTimeout(() => (list[round] = Math.max(list[round] ?? 0, Date.now())), runMs).unref();
      return runMs;
    },
  });
  const processes = [];
  try {
    for (const [i, ns] of sides.entries()) {
      const env = roleEnv(ctx, ns, simulator, { ...POLL_ENV, POLL_LEARN: String(i === 1) });
      processes.push(...(await launchRoles(ctx, ns, 'poller', 1, env)));
      processes.push(...(await launchRoles(ctx, ns, 'worker', 1, env)));
    }
    await Promise.all(sides.map((ns, i) => enqueue(ctx, ns, i === 1, jobs, rounds)));
    const total = PROJECTS.length * jobs * rounds;
    const done = async () =>
      (await Promise.all(sides.map((ns) => ctx.admin.xlen(ns.eventsStream)))).every(
        (n) => n >= total,
      );
    // Rounds of runs up to 2.5 minutes, each seen up to a minute late: 5 real minutes a round.
    const timeoutMs = Math.max(15 * 60_000, (rounds * 300_000) / COMPRESSION);
    await waitUntil(done, `${total} events on each side`, timeoutMs, 200);
    const followUps = (await Promise.all(sides.map((ns) => measured(ctx, ns, ends)))).flat();
    return { followUps, gets: getsByRound(simulator, starts, rounds) };
  } finally {
    await stopAll(processes);
    await simulator.close();
  }
}

/** Every follow-up of a side, each job's in its rounds' order (its lane keeps that order). */
async function enqueue(
  ctx: BenchContext,
  ns: Namespace,
  learn: boolean,
  jobs: number,
  rounds: number,
): Promise<void> {
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const side = learn ? 'on' : 'off';
  try {
    await producer.sendMany(
      Array.from({ length: rounds }, (_, round) =>
        PROJECTS.flatMap((p) =>
          Array.from({ length: jobs }, (_, j) => ({
            projectId: `${side}-${p.name}`,
            jobId: `j${j}`,
            prompt: `round ${round} of ${p.name}/j${j}`,
          })),
        ),
      ).flat(),
    );
  } finally {
    await producer.close();
  }
}

/** Run end → event of each follow-up of a side: its job's k-th event ends its k-th run. */
async function measured(
  ctx: BenchContext,
  ns: Namespace,
  ends: ReadonlyMap<string, readonly number[]>,
): Promise<Measured[]> {
  const seen = new Map<string, number>();
  const out: Measured[] = [];
  for (const [id, fields] of await ctx.admin.xrange(ns.eventsStream, '-', '+')) {
    const field = (name: string) => fields[fields.indexOf(name) + 1] ?? '';
    const key = `${field('projectId')}/${field('jobId')}`;
    const round = seen.get(key) ?? 0;
    seen.set(key, round + 1);
    const endAt = ends.get(key)?.[round];
    const { learn, base } = sideOf(field('projectId'));
    const project = PROJECTS.find((p) => p.name === base);
    if (endAt === undefined || !project) continue;
    out.push({ learn, project, round, lateMs: (Number(id.split('-')[0]) - endAt) * COMPRESSION });
  }
  return out;
}

/**
 * GETs by side and project, summed over its jobs, for each round: a GET counts for the run that
 * started last before it (the job's `starts`).
 */
function getsByRound(
  simulator: Simulator,
  starts: ReadonlyMap<string, readonly number[]>,
  rounds: number,
): Map<string, number[]> {
  const gets = new Map<string, number[]>();
  for (const r of simulator.requests) {
    if (r.kind !== 'get' || r.projectId === undefined) continue;
    const runStarts = starts.get(`${r.projectId}/${r.jobId ?? ''}`) ?? [];
    const round = runStarts.filter((at) => at <= r.at).length - 1;
    if (round < 0) continue;
    const counts = gets.get(r.projectId) ?? new Array<number>(rounds).fill(0);
    counts[round] = (counts[round] ?? 0) + 1;
    gets.set(r.projectId, counts);
  }
  return gets;
}
