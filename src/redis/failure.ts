import type { Redis } from 'ioredis';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * A Redis failure as the library reports it (contract, section 4): unreachable or not serving
 * ({@link RedisUnavailableError}, retry later) or a command refused ({@link RedisCommandError}).
 * The producer, the admin and the event reader map every failure with {@link asRedisFailure}.
 */

/**
 * Redis could not be reached, or failed mid-call. Code `redis_unavailable`. Before the call left
 * (`timeoutMs` given) nothing was enqueued; after, the write may have landed: retry with the same
 * key.
 */
export class RedisUnavailableError extends AgentDispatchError {
  readonly code: 'redis_unavailable' | 'claim_released' = 'redis_unavailable';
  constructor(timeoutMsOrMessage: number | string, cause?: unknown) {
    super(
      typeof timeoutMsOrMessage === 'number'
        ? `Redis was not reachable within ${timeoutMsOrMessage} ms; nothing was read or written`
        : timeoutMsOrMessage,
      { cause },
    );
    this.name = 'RedisUnavailableError';
  }
}

/**
 * Redis refused a command for a reason that is not "not now" (a wrong type, a missing script, a
 * limit of the server's configuration). Code `redis_error`; `cause` is Redis's reply. Whether a
 * write landed is unknown: retry with the same key once the cause is fixed.
 */
export class RedisCommandError extends AgentDispatchError {
  readonly code = 'redis_error';
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'RedisCommandError';
  }
}

/** Error codes of the socket layer that mean the server is not reachable. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
/** Redis error replies (their first word) that mean "not now" rather than "wrong command". */
const UNAVAILABLE_REPLIES = new Set([
  'LOADING',
  'BUSY',
  'MASTERDOWN',
  'READONLY',
  'TRYAGAIN',
  'CLUSTERDOWN',
  'NOREPLICAS',
  // Out of memory, or writes stopped after a failed save: the server recovers without a change.
  'OOM',
  'MISCONF',
  // A MULTI discarded, because a command in it was refused (typically OOM).
  'EXECABORT',
]);

/**
 * `err` as the library's error: an `AgentDispatchError` as it is; a {@link RedisUnavailableError}
 * when it means Redis is unreachable or not serving (the connection is not ready, for ioredis
 * rejects those commands with plain errors, so its state is what tells; a socket error code;
 * ioredis giving up on retries; a "not now" reply); anything else a {@link RedisCommandError}.
 * `cause` is `err`: no error leaves the library without a stable code.
 */
export function asRedisFailure(err: unknown, redis: Redis): AgentDispatchError {
  if (err instanceof AgentDispatchError) return err;
  const { code, name, message } = (err ?? {}) as {
    code?: unknown;
    name?: unknown;
    message?: unknown;
  };
  const reply = typeof message === 'string' ? message.split(' ', 1)[0] : undefined;
  const unavailable =
    redis.status !== 'ready' ||
    (typeof code === 'string' && CONNECTION_CODES.has(code)) ||
    name === 'MaxRetriesPerRequestError' ||
    (reply !== undefined && UNAVAILABLE_REPLIES.has(reply));
  if (unavailable)
    return new RedisUnavailableError(
      `Redis failed during the call (${reply ?? 'no reply'}); the follow-ups may or may not be stored: retry with the same key`,
      err,
    );
  return new RedisCommandError(
    `Redis refused the call (${typeof message === 'string' ? message : String(err)}); the follow-ups may or may not be stored`,
    err,
  );
}

/**
 * Resolves once `redis` is ready, rejects with `RedisUnavailableError` after `timeoutMs`: with no
 * offline queue a command before it is up would fail, and a connection error is no reason to give
 * up early (ioredis reconnects). A cluster client counts from `connect` on, as BullMQ counts it.
 */
export function untilReady(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready' || (redis.isCluster && redis.status === 'connect'))
    return Promise.resolve();
  if (redis.status === 'wait') redis.connect().catch(() => {});
  return new Promise((resolve, reject) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new RedisUnavailableError(timeoutMs));
    }, timeoutMs);
    redis.once('ready', onReady);
  });
}
