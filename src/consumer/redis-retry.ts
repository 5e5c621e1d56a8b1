import { sleep } from '../runtime/deadline.js';
import { markSentRetryMs, type SendTimeouts } from '../runtime/in-flight.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';

/**
 * Retries of the worker's own Redis commands. Only commands that are safe to run twice are
 * retried: ACQUIRE with its attempt token (a second run answers `go` again, spending nothing),
 * MARK_SENT and REQUEUE (a second run finds its own state). BullMQ's commands are BullMQ's
 * business.
 */

/** ACQUIRE is retried this many times after a connection error, `ACQUIRE_BACKOFF_MS` doubling. */
const ACQUIRE_RETRIES = 4;
const ACQUIRE_BACKOFF_MS = 100;
/** The longest wait between two tries of recording a send's answer. */
const MAX_BACKOFF_MS = 2_000;

/** Network error codes of a connection that broke under a command. */
const CONNECTION_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN']);

/**
 * Whether `err` says the connection failed under a command, so the command may or may not have
 * run: ioredis's `MaxRetriesPerRequestError`, a socket error code, or its "Connection is closed."
 * (an Error with no code or class of its own, so its text is the only sign).
 */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'MaxRetriesPerRequestError') return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  return err.message.startsWith('Connection is closed');
}

/** Runs `command`, again after a connection error, a few times with a short backoff. */
export async function retryOnConnectionError<T>(command: () => Promise<T>): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await command();
    } catch (err) {
      if (retry >= ACQUIRE_RETRIES || !isConnectionError(err)) throw err;
      await sleep(ACQUIRE_BACKOFF_MS * 2 ** retry);
    }
  }
}

/**
 * Runs `command` until it succeeds or `budgetMs` has passed, after any error, backing off from
 * 100 ms to 2 s; `onError` hears of each failure. Rejects with the last error.
 */
export async function retryFor<T>(
  budgetMs: number,
  command: () => Promise<T>,
  onError: (err: unknown, retryInMs: number) => void,
): Promise<T> {
  const deadline = Date.now() + budgetMs;
  for (let waitMs = 100; ; waitMs = Math.min(2 * waitMs, MAX_BACKOFF_MS)) {
    try {
      return await command();
    } catch (err) {
      if (Date.now() + waitMs > deadline) throw err;
      onError(err, waitMs);
      await sleep(waitMs);
    }
  }
}

/**
 * Runs a write that records what became of a send (MARK_SENT, REQUEUE) with {@link retryFor}, for
 * as long as a send's answer may still be recorded (`markSentRetryMs`), logging each failure on
 * `log` as a Redis error, with `fields`.
 */
export function retryOutcomeWrite<T>(
  timeouts: SendTimeouts,
  log: Logger,
  command: () => Promise<T>,
  fields: Record<string, unknown> = {},
): Promise<T> {
  return retryFor(markSentRetryMs(timeouts), command, (err, retryInMs) =>
    log.warn({ ...fields, err, retryInMs }, LIFECYCLE.redisError),
  );
}
