import type { Redis } from 'ioredis';
import { NotDurableError } from '../redis/disk-wait.js';
import {
  assessDurability,
  probeServer,
  type DurabilityAssessment,
  type DurabilitySetting,
} from '../redis/durability.js';
import { asRedisFailure } from './errors.js';

/** `REDIS_DURABILITY`'s default. */
const FSYNC: DurabilitySetting = { mode: 'fsync', replicas: 0, strict: false };

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
}

/** The producer's {@link DiskGuard} for `REDIS_DURABILITY` `setting` (default `fsync`). */
export function diskGuard(
  setting: DurabilitySetting = FSYNC,
  timeoutMs: number,
  redis: Redis,
): DiskGuard {
  let assessing: Promise<DurabilityAssessment> | undefined;
  return {
    timeoutMs,
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
}
