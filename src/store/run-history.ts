import type { DispatchRecord } from '../dispatch/record.js';
import type { StoreState } from './store-state.js';

/**
 * A project's run history: how long its agent runs took from the send to their end, as a decayed
 * mean and variance (and the part of it that is only the gaps' uncertainty), one short string per
 * project (`Keys.runs`, runHistory-1.lua). It is told of each finished follow-up whose end was
 * seen precisely enough, and of a run that goes on past where it expected runs to end; it is
 * forgotten {@link RUN_HISTORY_TTL_MS} after its last update. The poller reads it with its claims
 * and shapes the reads of the project's runs by it (`learned-schedule.ts`).
 */

/** What the history says: runs seen (capped), their decayed mean and variance. */
export interface RunStats {
  readonly runs: number;
  readonly meanMs: number;
  readonly varMs2: number;
}

/**
 * The weight of a new run that ends a mean run's length or more after the one before: the history
 * follows a change within a few runs.
 */
export const RUN_WEIGHT = 0.3;
/**
 * The least weight of a new run, that of one ending right after the one before. Runs that end
 * together (a burst of sends) end in the order of their lengths: each at {@link RUN_WEIGHT}, the
 * history would keep the longest few of them, and read the next runs late.
 */
export const MIN_RUN_WEIGHT = 0.03;
/**
 * The most a new run weighs when the history's spread is mostly its gaps' (`noise`: runs seen
 * through the growing schedule's wide gaps) and this run's end is known better: such a history
 * narrows to the runs' own spread within a few precisely seen runs, not a dozen.
 */
export const SHARP_RUN_WEIGHT = 0.6;
/** The spread a history of one run is given (its standard deviation / its length). */
export const FIRST_RUN_SPREAD = 0.15;
/** A history not updated for this long is forgotten: memory stays bounded by active projects. */
export const RUN_HISTORY_TTL_MS = 7 * 24 * 3_600_000;
/**
 * How precisely a run's end must be known to feed a history that says nothing of its gap: the gap
 * between the last read that saw it active and the read that saw it ended, as a share of the
 * run's length.
 */
const MAX_GAP_SHARE = 2 / 3;
/** The least spread a history is taken to have, as a share of its mean: alike runs prove little. */
const MIN_SD_SHARE = 0.03;
/** A history's standard deviation, at least {@link MIN_SD_SHARE} of its mean (and 1 ms). */
export function spreadOf(stats: RunStats): number {
  return Math.max(Math.sqrt(Math.max(0, stats.varMs2)), MIN_SD_SHARE * stats.meanMs, 1);
}

/** Below this share of a history's runs ending in a gap, the history says nothing of the gap. */
const MIN_MASS = 1e-6;

/** A run seen ended: its length as best known, and the variance of that guess. */
export interface ObservedRun {
  readonly runMs: number;
  readonly varMs2: number;
}

/**
 * A run seen by a read at `atMs` (Redis's clock, as the claims'): ended, or `going` still, past
 * where its history expected it to end.
 */
export interface SeenRun extends ObservedRun {
  readonly atMs: number;
  readonly going?: boolean;
}

/** Parses a stored history (`runs mean var noise at`); `undefined` when absent or unreadable. */
export function parseRunStats(value: string | null | undefined): RunStats | undefined {
  const [runs, meanMs, varMs2] = (value ?? '').split(' ').map(Number);
  if (runs === undefined || meanMs === undefined || varMs2 === undefined) return undefined;
  if (!(runs >= 1) || !(meanMs > 0) || !(varMs2 >= 0)) return undefined;
  return { runs, meanMs, varMs2 };
}

/**
 * How long a run took, for a read at `nowMs` that saw it ended; `undefined` when its end is not
 * known precisely enough. The end lies between the last read that saw the run active
 * (`activeAt`) and this one. Where the project's history (`stats`) expects runs to end in that
 * gap, the guess is the history's own spread cut to the gap (`endInGap`): a run that ended
 * before the dense window is seen only at its start, and its gap's middle would count it far
 * short, or, were such gaps left out, the history would learn only the runs that end in its
 * window and drift away from the early ones. Otherwise the gap's middle, and a wide gap says too
 * little: one wider than two thirds of the run and than three `POLL_MIN_INTERVAL`s (the first read
 * of a run answered active at its send comes two and a half after it) is left out.
 */
export function observedRunMs(
  record: DispatchRecord,
  nowMs: number,
  pollMinIntervalMs: number,
  stats?: RunStats,
): SeenRun | undefined {
  const { sentAt, activeAt } = record;
  if (!record.seenActive || sentAt === undefined || activeAt === undefined) return undefined;
  if (activeAt < sentAt || nowMs <= activeAt) return undefined;
  const fromMs = activeAt - sentAt;
  const toMs = nowMs - sentAt;
  const expected = stats && endInGap(fromMs, toMs, stats);
  if (expected) return { ...expected, atMs: nowMs };
  const gapMs = toMs - fromMs;
  const runMs = (fromMs + toMs) / 2;
  return gapMs <= Math.max(3 * pollMinIntervalMs, MAX_GAP_SHARE * runMs)
    ? { runMs: Math.round(runMs), varMs2: Math.round(gapMs ** 2 / 12), atMs: nowMs }
    : undefined;
}

/**
 * Where in the gap from `fromMs` to `toMs` a run ended, as history expects it: the mean and
 * variance of the history's spread (taken as normal) cut to the gap; `undefined` where next to
 * none of its runs end there. Never wider than the gap's own spread (gap² / 12), nor outside it.
 */
export function endInGap(fromMs: number, toMs: number, stats: RunStats): ObservedRun | undefined {
  const sd = spreadOf(stats);
  const a = (fromMs - stats.meanMs) / sd;
  const b = (toMs - stats.meanMs) / sd;
  // A gap narrow against the spread: the formulas below cancel out; its middle is as good.
  if (b - a < 0.01) return undefined;
  const mass = a > 0 ? tail(a) - tail(b) : b < 0 ? tail(-b) - tail(-a) : 1 - tail(-a) - tail(b);
  if (!(mass >= MIN_MASS)) return undefined;
  const shift = (density(a) - density(b)) / mass;
  const spread = 1 + (a * density(a) - b * density(b)) / mass - shift ** 2;
  const runMs = Math.min(toMs, Math.max(fromMs, stats.meanMs + sd * shift));
  const varMs2 = Math.min((toMs - fromMs) ** 2 / 12, Math.max(0, sd ** 2 * spread));
  return { runMs: Math.round(runMs), varMs2: Math.round(varMs2) };
}

/**
 * A run still going `sinceMs` after its send, past where its history expected runs to end: its
 * length as the history's runs that go on that long have it (its spread cut below `sinceMs`), or
 * `sinceMs` where next to none of them do, as uncertain as the history itself (so it does not
 * weigh as a run seen precisely). Folded in, it tells the history what its ended runs cannot yet:
 * the runs of a burst end shortest first, and a history of those alone reads the long ones in a
 * window where they do not end.
 */
export function runBeyond(sinceMs: number, stats: RunStats): ObservedRun {
  const sd = spreadOf(stats);
  const a = (sinceMs - stats.meanMs) / sd;
  const mass = tail(a);
  const runMs = mass >= MIN_MASS ? stats.meanMs + (sd * density(a)) / mass : sinceMs;
  return { runMs: Math.round(Math.max(sinceMs, runMs)), varMs2: Math.round(stats.varMs2) };
}

/** The standard normal density. */
const density = (x: number) => Math.exp(-(x * x) / 2) / Math.sqrt(2 * Math.PI);

/**
 * The standard normal's upper tail, 1 − Φ(x), through erfc (Numerical Recipes' `erfcc`, within
 * 1.2e-7 of it relatively everywhere, so far tails keep their precision).
 */
function tail(x: number): number {
  const z = Math.abs(x) / Math.SQRT2;
  const t = 1 / (1 + z / 2);
  const poly = [
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
    1.48851587, -0.82215223, 0.17087277,
  ].reduceRight((acc, c) => c + t * acc, 0);
  const erfc = t * Math.exp(-z * z + poly);
  return (x >= 0 ? erfc : 2 - erfc) / 2;
}

/**
 * Folds one run of `projectId` into its history: its length, the variance of that guess, and when
 * it was seen ended. A history's first runs weigh alike (a running mean); after that a run weighs
 * between {@link MIN_RUN_WEIGHT} and {@link RUN_WEIGHT}, by how long after the last one it ended,
 * and a run known more precisely than the history's noise up to {@link SHARP_RUN_WEIGHT}.
 */
export async function recordRun(
  state: StoreState,
  projectId: string,
  { runMs, varMs2, atMs, going }: SeenRun,
): Promise<RunStats | undefined> {
  const reply = await state.scripts.run(
    'runHistory',
    [state.keys.runs(projectId)],
    [
      Math.round(runMs),
      RUN_WEIGHT,
      FIRST_RUN_SPREAD,
      RUN_HISTORY_TTL_MS,
      varMs2,
      SHARP_RUN_WEIGHT,
      MIN_RUN_WEIGHT,
      Math.round(atMs),
      going ? 1 : 0,
    ],
  );
  return parseRunStats(typeof reply === 'string' ? reply : undefined);
}
