import type { Redis } from 'ioredis';
import { InvalidFollowUpError, type FieldProblem } from '../dispatch/followup-problems.js';
import { checkDispatch, type Dispatchable, type Unresolved } from '../dispatch/creation.js';
import { shardOf } from '../redis/keys.js';
import { resolveChains } from './chain.js';
import { describeDispatch } from '../dispatch/status.js';
import { keepResolved, LIBRARY_DEFAULTS } from '../config/index.js';
import {
  asRedisFailure,
  guardCalls,
  IdempotencyConflictError,
  RedisUnavailableError,
  type SendResult,
} from './errors.js';
import { openTool } from './tool.js';
import { startSendSpans } from '../telemetry/tracing.js';
import { cancelFollowUp, checkId } from './controls.js';
import { controlFailure } from './disk.js';
import { enqueueByShard } from './enqueue.js';
import type { ProducerShard } from './fleet.js';

import type { Producer, ProducerOptions } from './api.js';
import type { DispatchInput } from '../dispatch/creation.js';

export type { Producer, ProducerOptions } from './api.js';

export { IdempotencyConflictError, InvalidFollowUpError, RedisUnavailableError, type SendResult };

/**
 * Creates a producer. Its Redis connection fails fast (no offline queue): while Redis is down,
 * `send` rejects at once instead of holding follow-ups in memory where a crash would lose them.
 */
export function createProducer(options: ProducerOptions): Producer {
  const promptMaxBytes = options.promptMaxBytes ?? LIBRARY_DEFAULTS.promptMaxBytes;
  const attempts = options.sendAttempts ?? LIBRARY_DEFAULTS.sendAttempts;
  const { redis, disk, fleet, resolved } = openTool(options, 'producer');
  let closing: Promise<void> | undefined;

  /**
   * Every shard, and BullMQ's client of their queues (the producer's one connection): REGISTER
   * joins BullMQ's MULTI there, and WAITAOF must go where the MULTI went.
   */
  async function connection(): Promise<{ client: Redis; shards: readonly ProducerShard[] }> {
    const shards = await fleet.shards();
    try {
      const client = (await (shards[0] as ProducerShard).queue.backend.client) as unknown as Redis;
      return { client, shards };
    } catch (err) {
      throw asRedisFailure(err, redis);
    }
  }

  /**
   * The record of `dispatchId` and the shard that holds it (the first shard when none does): the
   * id does not name its shard, so every shard is asked, in parallel.
   */
  async function recordOf(dispatchId: string) {
    const { client, shards } = await connection();
    const records = await Promise.all(
      shards.map((s) => s.store(client).sends.get(dispatchId)),
    ).catch((err: unknown) => {
      throw asRedisFailure(err, redis);
    });
    const found = records.findIndex((r) => r !== undefined);
    return { client, record: records[found], shard: shards[Math.max(0, found)] as ProducerShard };
  }

  /** The record of `dispatchId` in the shard of `projectId`, for an `after` to name. */
  async function recordIn(projectId: string, dispatchId: string) {
    const { client, shards } = await connection();
    const shard = shards[shardOf(projectId, shards.length)] as ProducerShard;
    return shard
      .store(client)
      .sends.get(dispatchId)
      .catch((err: unknown) => {
        throw asRedisFailure(err, redis);
      });
  }

  /** Enqueues valid follow-ups, each in its `send dispatch` span (the caller's context its parent). */
  async function enqueue(followUps: readonly Dispatchable[]): Promise<SendResult[]> {
    const spans = startSendSpans(followUps.length);
    try {
      const { client, shards } = await connection();
      const results = await enqueueByShard(
        { redis, attempts, disk },
        client,
        shards,
        followUps,
        spans.traceparents,
      );
      spans.end(results.map((r) => r.dispatchId));
      return results;
    } catch (err) {
      spans.end(undefined, err);
      throw err;
    }
  }

  const producer = guardCalls<Producer>(
    {
      async send(followUp) {
        const [result] = await this.sendMany([followUp]).catch((err: unknown) => {
          if (err instanceof InvalidFollowUpError)
            throw new InvalidFollowUpError(err.problems.map(withoutIndex));
          if (err instanceof IdempotencyConflictError)
            throw new IdempotencyConflictError(
              err.conflicts.map(({ key, dispatchId }) => ({ key, dispatchId })),
              err.results,
            );
          throw err;
        });
        return result as SendResult;
      },
      async sendMany(followUps) {
        if (!Array.isArray(followUps)) {
          throw new InvalidFollowUpError([{ field: '(batch)', message: 'must be an array' }]);
        }
        const valid: Unresolved[] = [];
        const problems: FieldProblem[] = [];
        for (const [index, input] of followUps.entries()) {
          const checked = checkDispatch(input, promptMaxBytes, index);
          if (checked.ok) valid.push(checked.value);
          else problems.push(...checked.problems);
        }
        if (problems.length > 0) throw new InvalidFollowUpError(problems);
        if (valid.length === 0) return [];
        // Only creations and chained follow-ups have lanes to resolve (chain.ts).
        const chained = valid.some((v) => v.kind === 'create' || v.afterRef !== undefined);
        return enqueue(chained ? await resolveChains(valid, recordIn, true) : valid);
      },
      async create(input) {
        const creation = typeof input === 'object' && input !== null ? input : {};
        return this.send({ ...(creation as object), create: true } as DispatchInput);
      },
      async status(dispatchId) {
        if (typeof dispatchId !== 'string' || dispatchId.length === 0 || dispatchId.length > 200) {
          throw new InvalidFollowUpError([
            { field: 'dispatchId', message: 'must be a non-empty string' },
          ]);
        }
        const { record } = await recordOf(dispatchId);
        return record ? describeDispatch(record) : null;
      },
      async cancel(dispatchIdInput) {
        const dispatchId = checkId('dispatchId', dispatchIdInput);
        const { client, shard } = await recordOf(dispatchId);
        // A strict REDIS_DURABILITY the server cannot keep refuses before anything is written.
        await disk.assess(client);
        return cancelFollowUp({ store: shard.store(client), queue: shard.queue }, dispatchId).catch(
          (err: unknown) => {
            throw controlFailure(err, redis, 'the cancel may or may not be kept: see status');
          },
        );
      },
      close() {
        closing ??= (async () => {
          await fleet.close();
          if (!options.connection) redis.disconnect();
        })();
        return closing;
      },
    },
    redis,
  );
  return keepResolved(producer, { ...resolved, promptMaxBytes, sendAttempts: attempts });
}

function withoutIndex({ field, message }: FieldProblem): FieldProblem {
  return { field, message };
}
