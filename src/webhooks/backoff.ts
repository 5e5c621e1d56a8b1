/**
 * When a failed delivery is tried again: exponential backoff with jitter, for up to
 * `WEBHOOK_MAX_AGE` after the delivery was queued (or redriven), then never (dead-lettered).
 */

/** The first retry waits about this long; each one after doubles it... */
const FIRST_RETRY_MS = 1_000;
/** ...up to this: an endpoint down for hours is still tried twice an hour. */
const MAX_RETRY_MS = 30 * 60_000;

/**
 * The wait before attempt `attemptsMade + 1`, or -1 when the delivery has had `maxAgeMs` since
 * `sinceMs` (BullMQ then fails it: the dead letter). Jitter (half to all of the doubled wait)
 * keeps the retries of many deliveries to one endpoint that came back from arriving together;
 * the last wait is cut so that one attempt still happens at the end of the max age.
 */
export function retryDelayMs(
  attemptsMade: number,
  sinceMs: number,
  maxAgeMs: number,
  nowMs: number,
  random: () => number = Math.random,
): number {
  const leftMs = sinceMs + maxAgeMs - nowMs;
  if (leftMs <= 0) return -1;
  const full = Math.min(FIRST_RETRY_MS * 2 ** Math.max(0, attemptsMade - 1), MAX_RETRY_MS);
  const jittered = Math.round(full / 2 + (random() * full) / 2);
  return Math.max(1, Math.min(jittered, leftMs));
}
