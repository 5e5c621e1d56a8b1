import type { Redis } from 'ioredis';
import { AgentDispatchError } from '../agent-dispatch-error.js';
import { asRedisFailure, RedisUnavailableError } from '../redis/failure.js';

export { asRedisFailure, RedisCommandError, RedisUnavailableError } from '../redis/failure.js';

/**
 * The producer's errors besides {@link InvalidFollowUpError}: each has a stable `code`, and callers
 * (the intake, the CLI) branch on the class, never on the message.
 */

/** What `send` answers: the dispatch, and whether it existed already (same idempotency key). */
export interface SendResult {
  dispatchId: string;
  deduplicated: boolean;
}

/** One follow-up whose idempotency key is already taken by a different follow-up. */
export interface KeyConflict {
  /** Its position in the batch (`sendMany`); absent for `send`. */
  readonly index?: number;
  readonly key: string;
  /** The dispatch that holds the key, with the content first sent under it. */
  readonly dispatchId: string;
  /**
   * Set when this item is refused because the creation it is chained to (`after`, this dispatch
   * id) was refused for a key conflict in the same call; `dispatchId` is then its own.
   */
  readonly after?: string | undefined;
}

/**
 * The field and message of one conflict: its key already used (naming the dispatch that holds
 * it), or its `after` naming a creation refused for a key conflict in the same call.
 */
export function conflictProblem(c: KeyConflict): { field: 'key' | 'after'; message: string } {
  if (c.after === undefined)
    return {
      field: 'key',
      message: `already used for a different follow-up (dispatch ${c.dispatchId})`,
    };
  return {
    field: 'after',
    message: `its creation (dispatch ${c.after}) was refused for a key conflict`,
  };
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
        .map((c) => {
          const { field, message } = conflictProblem(c);
          return `${c.index === undefined ? '' : `[${c.index}] `}${field}: ${message}`;
        })
        .join('; ') +
        (results.length > conflicts.length
          ? '; the other follow-ups of the batch were enqueued (see results)'
          : ''),
    );
    this.name = 'IdempotencyConflictError';
  }
}

/**
 * `api` with every method's failure mapped by {@link asRedisFailure}: the library's boundary, so
 * a failure no inner call mapped still reaches the caller as an `AgentDispatchError`.
 */
export function guardCalls<T extends object>(api: T, redis: Redis): T {
  const guarded: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(api)) {
    if (typeof value !== 'function') {
      guarded[name] = value;
      continue;
    }
    guarded[name] = (...args: unknown[]) => {
      let result: unknown;
      try {
        result = (value as (...a: unknown[]) => unknown).apply(api, args);
      } catch (err) {
        return Promise.reject(asRedisFailure(err, redis));
      }
      // A method that yields pages (an async iterator) is guarded page by page.
      if (result && typeof result === 'object' && Symbol.asyncIterator in result)
        return guardPages(result as AsyncIterable<unknown>, redis);
      return Promise.resolve(result).catch((err: unknown) => {
        throw asRedisFailure(err, redis);
      });
    };
  }
  return guarded as T;
}

/** A MULTI whose EXEC answered null (a WATCH broke it, or Redis discarded it): retryable. */
export function discardedTransaction(): RedisUnavailableError {
  return new RedisUnavailableError('Redis discarded the transaction; retry it with the same key');
}

/** `pages`, each failure mapped as {@link guardCalls} maps a call's. */
async function* guardPages<P>(pages: AsyncIterable<P>, redis: Redis): AsyncGenerator<P> {
  try {
    yield* pages;
  } catch (err) {
    throw asRedisFailure(err, redis);
  }
}
