import type { Redis } from 'ioredis';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * The producer's errors besides {@link InvalidFollowUpError}: each has a stable `code`, and callers
 * (the intake, the CLI) branch on the class, never on the message.
 */

/** What `send` answers: the dispatch, and whether it existed already (same idempotency key). */
export interface SendResult {
  dispatchId: string;
  deduplicated: boolean;
}

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

/** One follow-up whose idempotency key is already taken by a different follow-up. */
export interface KeyConflict {
  /** Its position in the batch (`sendMany`); absent for `send`. */
  readonly index?: number;
  readonly key: string;
  /** The dispatch that holds the key, with the content first sent under it. */
  readonly dispatchId: string;
}

/**
 * A follow-up came with an idempotency key already used for different content (project, job,
 * prompt or meta): it was not enqueued, and the first one is unchanged. Code `idempotency_conflict`,
 * field `key`. In a batch the other follow-ups were enqueued (one transaction, already committed):
 * `results` holds their answers in input order, `null` at each conflicting index.
 */
export class IdempotencyConflictError extends AgentDispatchError {
  readonly code = 'idempotency_conflict';
  readonly field = 'key';
  constructor(
    readonly conflicts: readonly KeyConflict[],
    readonly results: readonly (SendResult | null)[],
  ) {
    super(
      conflicts
        .map(
          (c) =>
            `${c.index === undefined ? '' : `[${c.index}] `}key: already used for a different follow-up (dispatch ${c.dispatchId})`,
        )
        .join('; ') +
        (results.length > conflicts.length
          ? '; the other follow-ups of the batch were enqueued (see results)'
          : ''),
    );
    this.name = 'IdempotencyConflictError';
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
]);

/**
 * `err` as a {@link RedisUnavailableError} when it means Redis is unreachable or not serving:
 * the connection is not ready (ioredis rejects those commands with plain errors, so its state is
 * what tells), a socket error code, ioredis giving up on retries, or a "not now" reply. Any other
 * error is returned as it is: it is not a reason to retry later.
 */
export function asRedisFailure(err: unknown, redis: Redis): unknown {
  if (err instanceof RedisUnavailableError) return err;
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
    (name === 'ReplyError' && reply !== undefined && UNAVAILABLE_REPLIES.has(reply));
  return unavailable
    ? new RedisUnavailableError(
        'Redis failed during the call; the follow-ups may or may not be stored: retry with the same key',
        err,
      )
    : err;
}
