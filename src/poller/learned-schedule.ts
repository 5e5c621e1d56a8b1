import {
  firstRead,
  growingDelayMs,
  growingReads,
  type ReadBounds,
} from '../dispatch/read-schedule.js';
import { STATES, type DispatchRecord } from '../dispatch/record.js';
import { spreadOf, type RunStats } from '../store/run-history.js';

/**
 * The read schedule of a sent follow-up whose project has a run history (`POLL_LEARN`): few reads
 * while its run is surely going on, dense ones where history says it ends, and the growing
 * schedule again once it runs past that. Pure: history and bounds in, read times out. Also
 * which schedule a read takes, the learned one or the growing one (`nextDelayMs`).
 */

/** Runs a history needs before it shapes reads: one run says nothing of the spread. */
export const LEARN_MIN_RUNS = 2;
/**
 * Above this spread (standard deviation / mean) a project's runs are too irregular for a window
 * to pay: the growing schedule serves them as well at the same reads.
 */
export const LEARN_MAX_CV = 0.25;
/** The dense window: the expected end ± this many standard deviations (and one min interval). */
const WINDOW_SDS = 2;
/** Before the window, each read comes this many times later after the send than the last. */
const EARLY_GROWTH = 4;
/** Past the window, each wait this many times the last one while it is short. */
const LATE_GROWTH = 1.5;
/** Reads kept in hand against the growing schedule's count, for runs that end late. */
const SPARE_READS = 2;
/** A window serves only where its step is this many times shorter than the growing wait there. */
const MIN_GAIN = 1.5;

/** Where a learned schedule reads, in ms after the send. */
export interface Plan {
  /** Sparse reads before the window, the first where a send answered active is first read. */
  readonly earlyMs: readonly number[];
  readonly windowStartMs: number;
  readonly windowEndMs: number;
  /** The wait between two reads in the window. */
  readonly stepMs: number;
}

/**
 * The learned plan for a history, or `undefined` where the growing schedule serves: too few runs,
 * runs too irregular, or too short for a window to read them more densely. The window's step
 * spends no more reads, for a run of the mean length, than the growing schedule would (less
 * {@link SPARE_READS}).
 */
export function planReads(stats: RunStats | undefined, b: ReadBounds): Plan | undefined {
  if (!stats || stats.runs < LEARN_MIN_RUNS || !(stats.meanMs > 0)) return undefined;
  const sdMs = spreadOf(stats);
  if (sdMs / stats.meanMs > LEARN_MAX_CV) return undefined;
  const min = b.pollMinIntervalMs;
  const halfMs = WINDOW_SDS * sdMs + min;
  const windowStartMs = Math.max(min, stats.meanMs - halfMs);
  const windowEndMs = stats.meanMs + halfMs;
  // The early reads: the first where a follow-up whose send answered active is first read (as
  // nearly every one is: `firstRead`), standing for the first two of a plan without it (at
  // POLL_MIN_INTERVAL and four times that), then each a few times later than the last, but no wait
  // past POLL_MAX_INTERVAL: every read counted.
  const first = firstRead(true, b);
  const earlyMs: number[] = [];
  for (let t = first.atMs, stood = min * EARLY_GROWTH; t < windowStartMs;) {
    earlyMs.push(t);
    stood = Math.min(stood * EARLY_GROWTH, stood + b.pollMaxIntervalMs);
    t = Math.max(t + min, stood);
  }
  // A run of the mean length sees the early reads and half the window's.
  const growing = growingReads(stats.meanMs, b, first);
  const halfWindowReads = Math.max(1, growing.reads - earlyMs.length - SPARE_READS);
  const stepMs = Math.min(
    b.pollMaxIntervalMs,
    Math.max(min, (windowEndMs - windowStartMs) / (2 * halfWindowReads)),
  );
  // Short runs: where the growing schedule, still growing, reads about as densely at the mean, a
  // window gains nothing, and risks reading late where the history is young.
  const short = growing.lastWaitMs < b.pollMaxIntervalMs;
  if (short && stepMs * MIN_GAIN > growing.lastWaitMs) return undefined;
  return { earlyMs, windowStartMs, windowEndMs, stepMs };
}

/**
 * The wait after a read `sinceSendMs` after the send: to the plan's next read, or, past the
 * window, the growing schedule's from the last wait (`lastMs`). Within the bounds.
 */
export function plannedDelayMs(
  plan: Plan,
  sinceSendMs: number,
  lastMs: number,
  b: ReadBounds,
): number {
  const bound = (ms: number) =>
    Math.round(Math.min(b.pollMaxIntervalMs, Math.max(b.pollMinIntervalMs, ms)));
  // A read comes at its planned time or a little after it (rounded, a tick away): the next one is
  // the first planned well after this read, not one a few ms ahead.
  const soonMs = sinceSendMs + b.pollMinIntervalMs / 2;
  const early = plan.earlyMs.find((t) => t > soonMs);
  if (early !== undefined) return bound(early - sinceSendMs);
  if (soonMs < plan.windowStartMs) return bound(plan.windowStartMs - sinceSendMs);
  if (sinceSendMs < plan.windowEndMs) {
    const steps = Math.round((sinceSendMs - plan.windowStartMs) / plan.stepMs) + 1;
    return bound(plan.windowStartMs + steps * plan.stepMs - sinceSendMs);
  }
  // Past what history expected: back to a growing wait, from the window's step, by half at first
  // (a run a little late is still seen soon), doubling once the wait passes a tenth of the run.
  const lastWaitMs = Math.max(lastMs, plan.stepMs);
  return bound(lastWaitMs * (lastWaitMs < sinceSendMs / 10 ? LATE_GROWTH : 2));
}

/**
 * Whether a read `sinceSendMs` after the send of a `sent` follow-up, which saw its run still
 * going, is the first past the window where its project's history expected the run to end: the
 * last read that saw it active (`activeAt`) came before the window's end, this one after, and the
 * history was not told of this send's run yet (`overran`: told, its window then moves on). `plan`:
 * the follow-up's, as {@link planFor} answers. A run
 * first seen active past the window (its send's answer did not show it, or it was `unsettled`
 * then) is not told: its end is, as every run's.
 */
export function firstPastWindow(
  record: DispatchRecord,
  sinceSendMs: number,
  plan: Plan | undefined,
): boolean {
  const { activeAt, sentAt } = record;
  if (!plan || activeAt === undefined || sentAt === undefined) return false;
  if (record.overran === sentAt) return false;
  return activeAt - sentAt < plan.windowEndMs && sinceSendMs >= plan.windowEndMs;
}

/**
 * The learned plan of a follow-up's reads: a `sent` follow-up's whose project has a history that
 * shapes one (`planReads`), else `undefined` (the growing schedule). An `unsettled` send keeps
 * the growing schedule: its early reads must catch the run active, or it ends undeliverable.
 */
export function planFor(
  record: DispatchRecord,
  s: ReadBounds,
  runs: RunStats | undefined,
): Plan | undefined {
  return record.state === STATES.sent ? planReads(runs, s) : undefined;
}

/**
 * The next wait between reads, `sinceSendMs` after the send: the learned `plan`'s where there is
 * one ({@link planFor}), else the growing schedule's.
 */
export function nextDelayMs(
  record: DispatchRecord,
  sinceSendMs: number,
  s: ReadBounds,
  plan?: Plan,
): number {
  const lastMs = record.pollDelayMs ?? s.pollMinIntervalMs;
  return plan
    ? plannedDelayMs(plan, sinceSendMs, lastMs, s)
    : growingDelayMs(lastMs, sinceSendMs, s);
}
