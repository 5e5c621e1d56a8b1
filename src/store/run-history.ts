import type { DispatchRecord } from '../dispatch/record.js';
import type { StoreState } from './store-state.js';

/**
 * A project's run history: how long its agent runs took from the send to their end, as a decayed
 * mean and variance (and the part of it that is only the gaps' uncertainty), one short string per
 * project (`Keys.runs`), updated once per finished follow-up whose end was seen precisely enough
 * (runHistory-1.lua), and forgotten {@link RUN_HISTORY_TTL_MS} after its last update. The poller
 * reads it with its claims and shapes the reads of the project's runs by it (`learned-schedule.ts`).
 */

/** What the history says: runs seen (capped), their decayed mean and variance. */
export interface RunStats {
  readonly runs: number;
  readonly meanMs: number;
  readonly varMs2: number;
}

/** The weight of a new run: the history follows a change within a few runs. */
export const RUN_WEIGHT = 0.3;
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
 * How precisely a run's end must be known to feed the history: the gap between the last read
 * that saw it active and the read that saw it ended, as a share of the run's length.
 */
const MAX_GAP_SHARE = 2 / 3;

/** A run seen ended: its length (the gap's middle) and the gap its end lies in. */
export interface ObservedRun {
  readonly runMs: number;
  readonly gapMs: number;
}

/** Parses a stored history (`runs mean var noise`); `undefined` when absent or unreadable. */
export function parseRunStats(value: string | null | undefined): RunStats | undefined {
  const [runs, meanMs, varMs2] = (value ?? '').split(' ').map(Number);
  if (runs === undefined || meanMs === undefined || varMs2 === undefined) return undefined;
  if (!(runs >= 1) || !(meanMs > 0) || !(varMs2 >= 0)) return undefined;
  return { runs, meanMs, varMs2 };
}

/**
 * How long a run took, for a read at `nowMs` that saw it ended; `undefined` when its end is not
 * known precisely enough. The end lies between the last read that saw the run active
 * (`activeAt`) and this one. Taking this read as the end would count every run long by half the
 * gap (more where reads are sparse), the last active read short by as much: the midpoint is
 * unbiased while the end is about evenly likely anywhere in the gap. A wide gap (a backoff, a
 * park, a stopped poller) says too little and is left out: one wider than two thirds of the run
 * and than three `POLL_MIN_INTERVAL`s (the first read of a run answered active at its send comes
 * two and a half after it). The bound is relative, so the runs that end where reads are sparse
 * (outside the dense window) still count, and the history does not narrow itself around its own
 * window. The gap's own uncertainty goes into the spread (`recordRun`): runs seen through wide gaps
 * all share one midpoint, which alone would look like a project whose runs never vary.
 */
export function observedRunMs(
  record: DispatchRecord,
  nowMs: number,
  pollMinIntervalMs: number,
): ObservedRun | undefined {
  const { sentAt, activeAt } = record;
  if (!record.seenActive || sentAt === undefined || activeAt === undefined) return undefined;
  if (activeAt < sentAt || nowMs <= activeAt) return undefined;
  const gapMs = nowMs - activeAt;
  const runMs = (activeAt + nowMs) / 2 - sentAt;
  return gapMs <= Math.max(3 * pollMinIntervalMs, MAX_GAP_SHARE * runMs)
    ? { runMs: Math.round(runMs), gapMs }
    : undefined;
}

/**
 * Folds one run of `projectId` into its history: its length, and the variance of an end known
 * only to lie somewhere in a gap of `gapMs` (evenly likely anywhere: gap² / 12). A run known more
 * precisely than the history's noise weighs up to {@link SHARP_RUN_WEIGHT}.
 */
export async function recordRun(
  state: StoreState,
  projectId: string,
  { runMs, gapMs }: ObservedRun,
): Promise<RunStats | undefined> {
  const gapVariance = Math.round(gapMs ** 2 / 12);
  const reply = await state.scripts.run(
    'runHistory',
    [state.keys.runs(projectId)],
    [
      Math.round(runMs),
      RUN_WEIGHT,
      FIRST_RUN_SPREAD,
      RUN_HISTORY_TTL_MS,
      gapVariance,
      SHARP_RUN_WEIGHT,
    ],
  );
  return parseRunStats(typeof reply === 'string' ? reply : undefined);
}
