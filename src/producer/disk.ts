import type { Redis } from 'ioredis';
import type { DurabilitySetting } from '../config/durability.js';
import { NotDurableError, type DiskWait } from '../redis/disk-wait.js';
import { assessDurability, probeServer, type DurabilityAssessment } from '../redis/durability.js';
import { LIBRARY_DEFAULTS } from '../config/index.js';
import { asRedisFailure, RedisUnavailableError } from './errors.js';

/**
 * What the producer asks of the disk before it answers: the server assessed once, then each
 * transaction's connection marked with `beforeWrite` and waited for with `afterWrite`, at most
 * `timeoutMs` (see `enqueueIn`).
 */
export interface DiskGuard {
  /** WAITAOF's timeout, in milliseconds. */
  readonly timeoutMs: number;
  /**
   * What this server keeps, read once per producer (INFO and CONFIG GET, one round trip each),
   * before its first write. Rejects with {@link NotDurableError} when the setting is strict and
   * the server cannot keep it.
   */
  assess(client: Redis): Promise<DurabilityAssessment>;
  /**
   * The same as a store's {@link DiskWait}, for the writes of a cancel or a control on the
   * producer's (or the admin's) connection: they answer only once on disk, as `send` does.
   */
  readonly wait: DiskWait;
}

/** The producer's {@link DiskGuard} for `REDIS_DURABILITY` `setting` (default: `REDIS_DURABILITY`'s). */
export function diskGuard(
  setting: DurabilitySetting = LIBRARY_DEFAULTS.durability,
  timeoutMs: number,
  redis: Redis,
): DiskGuard {
  let assessing: Promise<DurabilityAssessment> | undefined;
  const guard: DiskGuard = {
    timeoutMs,
    wait: { timeoutMs, assessment: () => guard.assess(redis) },
    async assess(client) {
      assessing ??= probeServer(client).then(
        (facts) => assessDurability(setting, facts),
        (err: unknown) => {
          assessing = undefined;
          throw asRedisFailure(err, redis);
        },
      );
      const assessment = await assessing;
      if (setting.mode === 'fsync' && setting.strict && assessment.warning)
        throw new NotDurableError(`REDIS_DURABILITY is strict, and ${assessment.warning}`);
      return assessment;
    },
  };
  return guard;
}

/**
 * A write's failure as its caller sees it (a send's, a cancel's, a control's): a write not
 * confirmed on disk is a `RedisUnavailableError` saying what may be kept (`kept`);
 * Redis failures are mapped by `asRedisFailure`, anything else is returned as it is.
 */
export function controlFailure(err: unknown, redis: Redis, kept: string): unknown {
  if (err instanceof NotDurableError)
    return new RedisUnavailableError(`${err.message}; ${kept}`, err);
  return asRedisFailure(err, redis);
}
