/**
 * The read schedule without history: where a sent follow-up's status is read when its project has
 * no run history to go by (or runs too irregular for one), and where its first read falls. Pure.
 * The schedule shaped by history is `poller/learned-schedule.ts`.
 */

/** What bounds every wait between two reads: `POLL_MIN_INTERVAL`, `POLL_MAX_INTERVAL`. */
export interface ReadBounds {
  readonly pollMinIntervalMs: number;
  readonly pollMaxIntervalMs: number;
}

/**
 * The growing schedule (the one without history): the wait after `lastMs`, `sinceSendMs` after
 * the send. In the first 20 `POLL_MIN_INTERVAL`s it grows by half up to 4 of them, so a quick run
 * is seen ended soon; after that it doubles up to `POLL_MAX_INTERVAL`: few reads for long runs.
 * With the defaults: reads 0.5, 1.25, 2.4, 4.1, 6.1, 8.1, 10.1, 14.1, 22.1, 38.1, 70.1 s after the
 * send, then every minute.
 */
export function growingDelayMs(lastMs: number, sinceSendMs: number, b: ReadBounds): number {
  const min = b.pollMinIntervalMs;
  const nextMs = sinceSendMs < 20 * min ? Math.min(lastMs * 1.5, 4 * min) : lastMs * 2;
  return Math.min(b.pollMaxIntervalMs, Math.round(nextMs));
}

/**
 * The growing schedule's reads of a run that ends `runMs` after the send, from its first read
 * `first`: how many, and the wait before the last (the one that sees the end).
 */
export function growingReads(
  runMs: number,
  b: ReadBounds,
  first: FirstRead,
): { reads: number; lastWaitMs: number } {
  let reads = 1;
  let delayMs = first.waitMs;
  for (let atMs = first.atMs; atMs < runMs; reads++) {
    delayMs = growingDelayMs(delayMs, atMs, b);
    atMs += delayMs;
  }
  return { reads, lastWaitMs: delayMs };
}

/** A first read: when it falls after the send, and the wait it counts as (the next grows from it). */
export interface FirstRead {
  readonly atMs: number;
  readonly waitMs: number;
}

/**
 * The first read of a follow-up just sent. At `POLL_MIN_INTERVAL`, to see the run active; when
 * the send's own answer already shows it active, that read would see nothing new: the first is
 * then the growing schedule's second, as if the first had been made, unless that is further
 * than `POLL_MAX_INTERVAL` from the send.
 */
export function firstRead(answeredActive: boolean, b: ReadBounds): FirstRead {
  const min = b.pollMinIntervalMs;
  const waitMs = growingDelayMs(min, min, b);
  if (!answeredActive || min + waitMs > b.pollMaxIntervalMs) return { atMs: min, waitMs: min };
  return { atMs: min + waitMs, waitMs };
}
