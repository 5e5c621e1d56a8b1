/**
 * Jitter of wake-up times. Follow-ups parked together (a budget slot, a lane, a 429 park, a
 * status-read park) and reads scheduled together would otherwise all wake in the same instant: a
 * backlog of thousands then reaches Redis and the agent API as one burst. Each wait is spread by
 * a small random share of itself, bounded, and only ever later than asked (a park is never cut
 * short) unless a caller asks for an earlier spread explicitly ({@link earlierBy}).
 */

/** The largest share of a wait added to it. */
export const JITTER_SHARE = 0.1;
/** The most a wait is moved, whatever its length. */
export const JITTER_MAX_MS = 5_000;

/**
 * `waitMs` plus a random part of it: up to {@link JITTER_SHARE} of it, at most `capMs`
 * ({@link JITTER_MAX_MS} unless smaller). `random` is for tests.
 */
export function jitteredMs(
  waitMs: number,
  capMs = JITTER_MAX_MS,
  random: () => number = Math.random,
): number {
  if (!(waitMs > 0)) return waitMs;
  const spreadMs = Math.min(waitMs * JITTER_SHARE, capMs, JITTER_MAX_MS);
  return waitMs + Math.round(random() * spreadMs);
}

/** A wake-up time `untilMs` (epoch ms), `nowMs` now, moved later by {@link jitteredMs}. */
export function jitteredUntil(
  untilMs: number,
  nowMs = Date.now(),
  capMs = JITTER_MAX_MS,
  random: () => number = Math.random,
): number {
  return untilMs <= nowMs ? untilMs : nowMs + jitteredMs(untilMs - nowMs, capMs, random);
}

/** `untilMs` moved earlier by a random part of `spreadMs`: for a wake-up that must not be late. */
export function earlierBy(
  untilMs: number,
  spreadMs: number,
  random: () => number = Math.random,
): number {
  return untilMs - Math.round(random() * Math.max(0, spreadMs));
}

/**
 * `waitMs` spread like {@link jitteredMs} (by at most `capMs`), but never past `maxMs`: where the
 * later spread would pass it, the wait is moved earlier by as much instead. For status reads,
 * which `POLL_MAX_INTERVAL` bounds: reads at that bound would otherwise all keep their phase.
 */
export function jitteredWithin(
  waitMs: number,
  maxMs: number,
  capMs = JITTER_MAX_MS,
  random: () => number = Math.random,
): number {
  if (!(waitMs > 0)) return waitMs;
  const bounded = Math.min(waitMs, maxMs);
  const shiftMs = Math.round(random() * Math.min(bounded * JITTER_SHARE, capMs, JITTER_MAX_MS));
  return bounded + shiftMs <= maxMs ? bounded + shiftMs : bounded - shiftMs;
}
