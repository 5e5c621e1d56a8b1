import type { ScenarioResult, ScenarioRun, Table } from '../report.js';
import { num, percentile } from '../stats.js';
import { COMPRESSION, measureLearned, PROJECTS, type LearnedRun } from './learned-reads-run.js';

/**
 * Learned reads (POLL_LEARN): run end → event and GETs per follow-up for runs of minutes, the
 * learned schedule beside the growing one in the same run (two fleets at once, same run lengths).
 * Regular projects run within ±10 % of their mean; irregular ones anywhere in a wide range.
 */

const ROUNDS = 4;
const seconds = (v: number) => `${(v / 1000).toFixed(1)} s`;

interface Figures {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly n: number;
  readonly gets: number;
}

/** The figures of one side for the regular or irregular projects, rounds from `fromRound`. */
function figures(r: LearnedRun, learn: boolean, regular: boolean, fromRound: number): Figures {
  const late = r.followUps
    .filter((f) => f.learn === learn && f.project.regular === regular && f.round >= fromRound)
    .map((f) => f.lateMs);
  const projects = PROJECTS.filter((p) => p.regular === regular);
  // GETs per follow-up of these rounds: per project, summed over its jobs, then averaged.
  const gets =
    projects.reduce((sum, p) => {
      const byRound = r.gets.get(`${learn ? 'on' : 'off'}-${p.name}`) ?? [];
      return sum + byRound.slice(fromRound).reduce((a, b) => a + b, 0);
    }, 0) / Math.max(1, late.length);
  return {
    p50: percentile(late, 50),
    p90: percentile(late, 90),
    p99: percentile(late, 99),
    n: late.length,
    gets,
  };
}

function table(r: LearnedRun): Table {
  const rows: string[][] = [];
  for (const regular of [true, false]) {
    for (const [fromRound, which] of [
      [2, 'after two runs of history (rounds 3–4)'],
      [1, 'with history (rounds 2–4)'],
      [0, 'all rounds'],
    ] as const) {
      const off = figures(r, false, regular, fromRound);
      const on = figures(r, true, regular, fromRound);
      rows.push([
        `${regular ? 'regular' : 'irregular'}, ${which}`,
        `${seconds(off.p50)} / ${seconds(off.p90)} / ${seconds(off.p99)}`,
        `${seconds(on.p50)} / ${seconds(on.p90)} / ${seconds(on.p99)}`,
        `${num(on.p50 / Math.max(1, off.p50), 2)}× / ${num(on.p99 / Math.max(1, off.p99), 2)}×`,
        `${num(off.gets, 1)} → ${num(on.gets, 1)}`,
        String(on.n),
      ]);
    }
  }
  return {
    columns: [
      'projects',
      'growing: p50 / p90 / p99',
      'learned: p50 / p90 / p99',
      'learned ÷ growing (p50 / p99)',
      'GETs per follow-up: growing → learned',
      'follow-ups per side',
    ],
    rows,
  };
}

function report(r: LearnedRun, jobs: number): ScenarioResult {
  const reg = [figures(r, false, true, 2), figures(r, true, true, 2)] as const;
  const first = figures(r, true, true, 1);
  const all = [figures(r, false, true, 0), figures(r, true, true, 0)] as const;
  return {
    title: 'Learned reads',
    summary:
      `runs of 1–2 min (±10 %), after two runs of history: run end → event p50 ` +
      `${seconds(reg[1].p50)}, p99 ${seconds(reg[1].p99)} learned against ${seconds(reg[0].p50)}, ` +
      `${seconds(reg[0].p99)} growing (from the first round with history: p99 ` +
      `${seconds(first.p99)}), at ${num(reg[1].gets, 1)} against ${num(reg[0].gets, 1)} GETs per ` +
      `follow-up (all rounds: ${num(all[1].gets, 1)} against ${num(all[0].gets, 1)}).`,
    setup:
      `${PROJECTS.length} projects (${PROJECTS.map((p) => p.name).join(', ')}), ${jobs} agent jobs ` +
      `each, ${ROUNDS} follow-ups per job in order, on two fleets at once (one worker and one ` +
      `poller each) against one simulator: POLL_LEARN=false and POLL_LEARN=true, the same run ` +
      `lengths on both. Time is compressed ${COMPRESSION}×: run lengths and POLL_MIN_INTERVAL, ` +
      `POLL_MAX_INTERVAL, POLL_INTERVAL, ACTIVE_GRACE are all ${COMPRESSION} times shorter; ` +
      `latencies are reported ×${COMPRESSION}, as real time (BENCH_LEARNED_COMPRESSION=1 runs ` +
      `it in real time). Measured once.`,
    tables: [table(r)],
    limitedBy: [
      `The poll tick's own delay (claims, Redis round trips, a busy machine) is not compressed: ` +
        `×${COMPRESSION} in the figures, it weighs more here than in real time, on both sides alike.`,
      'History is per project and fed once per finished follow-up (and once per run that goes ' +
        'on past its window): the first round of a ' +
        "project's jobs runs without one (the growing schedule), and the second knows only " +
        "that round's ends as the growing schedule saw them, between reads up to a minute " +
        'apart: its window is as wide as those gaps.',
    ],
    notes: [
      "Run end = when the simulator's timer turned the run terminal (its start + its drawn " +
        'length, or later where the timer fired late); event time = the stream ' +
        'entry id. A GET counts for the round whose run its job had started last.',
    ],
  };
}

/** The scenario's run (registered in run.ts); `jobs`: agent jobs per project. */
export const learnedReadsScenario: ScenarioRun = async (ctx, jobs) =>
  report(await measureLearned(ctx, jobs, ROUNDS), jobs);
