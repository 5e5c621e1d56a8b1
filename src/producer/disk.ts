import type { Redis } from 'ioredis';
import {
  assessDurability,
  NotDurableError,
  probeServer,
  waitForDisk,
  type DurabilityAssessment,
  type DurabilitySetting,
} from '../redis/durability.js';
import type { WriteMark } from '../redis/write-mark.js';
import { asRedisFailure, RedisUnavailableError } from './errors.js';

/** `REDIS_DURABILITY`'s default. */
const FSYNC: DurabilitySetting = { mode: 'fsync', replicas: 0, strict: false };

/** What the producer asks of the disk before it answers: see {@link diskGuard}. */
export interface DiskGuard {
  /**
   * What this server keeps, read once per producer (INFO and CONFIG GET, one round trip each).
   * Rejects with {@link NotDurableError} when the setting is strict and the server cannot keep it.
   */
  assess(client: Redis): Promise<DurabilityAssessment>;
  /**
   * Waits until the write marked `mark` is on disk (WAITAOF on the connection that took it: on a
   * cluster, the shard's master's). A timeout is a retryable failure: the follow-ups may or may
   * not be kept, so retry with the same key.
   */
  onDisk(assessment: DurabilityAssessment, mark: WriteMark | undefined): Promise<void>;
}

/** The producer's {@link DiskGuard} for `REDIS_DURABILITY` `setting` (default `fsync`). */
export function diskGuard(
  setting: DurabilitySetting = FSYNC,
  timeoutMs: number,
  redis: Redis,
): DiskGuard {
  let assessing: Promise<DurabilityAssessment> | undefined;
  return {
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
    async onDisk(assessment, mark) {
      // Marked before the write whenever the assessment waits (see the producer).
      if (!mark) return;
      try {
        await waitForDisk(mark, assessment, timeoutMs);
      } catch (err) {
        throw err instanceof NotDurableError
          ? new RedisUnavailableError(`${err.message}; retry with the same key`, err)
          : asRedisFailure(err, redis);
      }
    },
  };
}
