import type { Redis } from 'ioredis';
import {
  checkFollowUp,
  InvalidFollowUpError,
  type FieldProblem,
  type FollowUp,
  type FollowUpInput,
} from '../dispatch/followup.js';
import { describeDispatch, type DispatchStatus } from '../dispatch/status.js';
import { connect } from '../redis/connections.js';
import {
  assessDurability,
  connectionOf,
  NotDurableError,
  probeServer,
  waitForDisk,
  type DurabilityAssessment,
  type DurabilitySetting,
} from '../redis/durability.js';
import { shardLayout } from '../redis/keys.js';
import { checkProducerLayout, LayoutError } from '../redis/layout.js';
import { within } from '../runtime/deadline.js';
import {
  asRedisFailure,
  IdempotencyConflictError,
  RedisUnavailableError,
  type SendResult,
} from './errors.js';
import { startSendSpans } from '../telemetry/tracing.js';
import { cancelFollowUp, type CancelResult } from './controls.js';
import { mergeShardResults, openShards, splitByShard, type ProducerShard } from './shards.js';
import { addMissingJobs, buildTransaction, execute, resultsOf } from './transaction.js';

/** `REDIS_DURABILITY`'s default. */
const FSYNC: DurabilitySetting = { mode: 'fsync', replicas: 0, strict: false };

/** Options of {@link createProducer}. Every default matches the service's settings. */
export interface ProducerOptions {
  redisUrl: string;
  /** @defaultValue `agent-dispatch` */
  prefix?: string;
  /** @defaultValue 65536 */
  promptMaxBytes?: number;
  /** Send attempts for transient failures, stored on each job. @defaultValue 8 */
  sendAttempts?: number;
  /** An existing connection to use instead of `redisUrl` (not closed by `close`). */
  connection?: Redis;
  /** How long a call waits for Redis to be reachable before it fails. @defaultValue 5000 */
  readyTimeoutMs?: number;
  /**
   * `REDIS_DURABILITY`: with `fsync` (the default) on a server that has WAITAOF, `send` answers
   * only once the follow-up is fsynced to the AOF (and to `replicas`), so a Redis crash cannot take
   * back an accepted follow-up. `strict` makes every call reject with {@link NotDurableError}
   * where the server cannot keep that promise.
   */
  durability?: DurabilitySetting;
  /** `DISPATCH_SHARDS`: the fleet's, checked on the first call. @defaultValue 1 */
  shards?: number;
  /** `REDIS_CLUSTER`: `redisUrl` is the seed node of a Redis Cluster. @defaultValue false */
  cluster?: boolean;
  /** How long `send` waits for the disk (WAITAOF) before it fails, retryable. @defaultValue 5000 */
  durabilityTimeoutMs?: number;
  /** `EVENTS_STREAM`, where `cancel`'s event goes. @defaultValue `agent-dispatch:events` */
  eventsStream?: string;
  /** `EVENTS_MAXLEN`. @defaultValue 1000000 */
  eventsMaxLen?: number;
  /** `DISPATCH_RETENTION` of a cancelled follow-up's record, in ms. @defaultValue 7 days */
  dispatchRetentionMs?: number;
}

/** The producer library (contract, section 4). */
export interface Producer {
  /**
   * Validates and enqueues one follow-up; throws {@link InvalidFollowUpError} naming the field,
   * {@link IdempotencyConflictError} when its key was used for a different follow-up, and
   * {@link RedisUnavailableError} when Redis is unreachable.
   */
  send(followUp: FollowUpInput): Promise<SendResult>;
  /**
   * Validates all (any invalid: nothing is enqueued), then enqueues all in one round trip per
   * shard, atomically per shard; results in input order. A key conflict rejects only its own item:
   * the others are enqueued, and the {@link IdempotencyConflictError} carries their results.
   */
  sendMany(followUps: readonly FollowUpInput[]): Promise<SendResult[]>;
  /** The state of a dispatch, or `null` when unknown or expired. */
  status(dispatchId: string): Promise<DispatchStatus | null>;
  /**
   * Ends a follow-up not sent yet with one `followup.cancelled` event, and hands its lane on.
   * Throws {@link NotCancellableError} (being sent, sent, finished) or {@link UnknownDispatchError},
   * having changed nothing.
   */
  cancel(dispatchId: string): Promise<CancelResult>;
  close(): Promise<void>;
}

export { IdempotencyConflictError, InvalidFollowUpError, RedisUnavailableError, type SendResult };

/**
 * Creates a producer. Its Redis connection fails fast (no offline queue): while Redis is down,
 * `send` rejects at once instead of holding follow-ups in memory where a crash would lose them.
 */
export function createProducer(options: ProducerOptions): Producer {
  const prefix = options.prefix ?? 'agent-dispatch';
  const promptMaxBytes = options.promptMaxBytes ?? 65_536;
  const attempts = options.sendAttempts ?? 8;
  const shardCount = options.shards ?? 1;
  const cluster = options.cluster ?? false;
  const redis =
    options.connection ??
    connect({ redisUrl: options.redisUrl, redisCluster: cluster }, 'producer', 'producer');
  redis.on('error', () => {
    // Failures reach the caller as rejected sends; the fail-fast connection never queues them.
  });
  // Queue errors reach the caller through the rejected promise of send/sendMany.
  const layout = shardLayout(
    prefix,
    options.eventsStream ?? 'agent-dispatch:events',
    shardCount,
    cluster,
  );
  // Only `cancel` ends a dispatch here; everything else ends in the consumer and poller.
  const shards = openShards(redis, layout, () => {}, {
    eventsMaxLen: options.eventsMaxLen ?? 1_000_000,
    retentionMs: options.dispatchRetentionMs ?? 7 * 86_400_000,
  });
  const queue = (shards[0] as ProducerShard).queue;
  let checking: Promise<void> | undefined;
  const readyTimeoutMs = options.readyTimeoutMs ?? 5_000;
  const durabilitySetting = options.durability ?? FSYNC;
  const durabilityTimeoutMs = options.durabilityTimeoutMs ?? 5_000;
  let assessing: Promise<DurabilityAssessment> | undefined;
  let closing: Promise<void> | undefined;

  /**
   * Waits for the connection, at most `readyTimeoutMs`: with no offline queue a command before
   * it is up would fail, and BullMQ's own wait has no end while Redis was never reachable.
   */
  async function ready(): Promise<void> {
    if (redis.status === 'ready') return;
    try {
      await within(queue.waitUntilReady(), readyTimeoutMs, () => {
        throw new RedisUnavailableError(readyTimeoutMs);
      });
    } catch (err) {
      throw asRedisFailure(err, redis);
    }
  }

  /** What this server keeps, read once per producer (INFO and CONFIG GET, one round trip each). */
  function durability(client: Redis): Promise<DurabilityAssessment> {
    assessing ??= probeServer(client).then(
      (facts) => assessDurability(durabilitySetting, facts),
      (err: unknown) => {
        assessing = undefined;
        throw asRedisFailure(err, redis);
      },
    );
    return assessing;
  }

  /**
   * Waits until the transaction is on disk (WAITAOF on the connection that wrote it). A timeout is
   * a retryable failure: the follow-ups may or may not be kept, so retry with the same key.
   */
  async function onDisk(
    client: Redis,
    assessment: DurabilityAssessment,
    wroteOn: number,
  ): Promise<void> {
    try {
      await waitForDisk(client, assessment, durabilityTimeoutMs, wroteOn);
    } catch (err) {
      throw err instanceof NotDurableError
        ? new RedisUnavailableError(`${err.message}; retry with the same key`, err)
        : asRedisFailure(err, redis);
    }
  }

  /**
   * BullMQ's own duplicate of the connection, once ready and checked (see `checkProducerLayout`):
   * REGISTER joins BullMQ's MULTI there, and WAITAOF must go where the MULTI went.
   */
  async function connection(): Promise<Redis> {
    await ready();
    const client = (await queue.backend.client) as unknown as Redis;
    checking ??= checkProducerLayout(client, { cluster, prefix, shardCount }).catch(
      (err: unknown) => {
        checking = undefined;
        throw err instanceof LayoutError ? err : asRedisFailure(err, redis);
      },
    );
    await checking;
    return client;
  }

  /** One shard's transaction: REGISTER and the job add of each follow-up, then the disk. */
  async function enqueueIn(
    client: Redis,
    assessment: DurabilityAssessment,
    shard: ProducerShard,
    followUps: readonly FollowUp[],
    traceparents: readonly (string | undefined)[],
  ): Promise<SendResult[]> {
    const store = shard.store(client);
    const transaction = await buildTransaction(
      shard.queue,
      client,
      store,
      followUps,
      attempts,
      traceparents,
    );
    const wroteOn = connectionOf(client);
    const first = await execute(transaction, redis);
    const replies = await addMissingJobs(shard.queue, client, transaction, first, attempts).catch(
      (err: unknown) => {
        throw asRedisFailure(err, redis);
      },
    );
    await onDisk(client, assessment, wroteOn);
    return resultsOf(followUps, transaction, replies, redis);
  }

  /** Enqueues valid follow-ups, each in its `send dispatch` span (the caller's context its parent). */
  async function enqueue(followUps: readonly FollowUp[]): Promise<SendResult[]> {
    const spans = startSendSpans(followUps.length);
    try {
      const client = await connection();
      const assessment = await durability(client);
      if (durabilitySetting.mode === 'fsync' && durabilitySetting.strict && assessment.warning)
        throw new NotDurableError(`REDIS_DURABILITY is strict, and ${assessment.warning}`);
      const batches = splitByShard(followUps, shardCount);
      const settled = await Promise.allSettled(
        batches.map((b) =>
          enqueueIn(
            client,
            assessment,
            shards[b.shard] as ProducerShard,
            b.followUps,
            b.indexes.map((i) => spans.traceparents[i]),
          ),
        ),
      );
      const results = mergeShardResults(followUps.length, batches, settled);
      spans.end(results.map((r) => r.dispatchId));
      return results;
    } catch (err) {
      spans.end(undefined, err);
      throw err;
    }
  }

  return {
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
      const valid: FollowUp[] = [];
      const problems: FieldProblem[] = [];
      for (const [index, input] of followUps.entries()) {
        const checked = checkFollowUp(input, promptMaxBytes, index);
        if (checked.ok) valid.push(checked.value);
        else problems.push(...checked.problems);
      }
      if (problems.length > 0) throw new InvalidFollowUpError(problems);
      return valid.length === 0 ? [] : enqueue(valid);
    },
    async status(dispatchId) {
      if (typeof dispatchId !== 'string' || dispatchId.length === 0 || dispatchId.length > 200) {
        throw new InvalidFollowUpError([
          { field: 'dispatchId', message: 'must be a non-empty string' },
        ]);
      }
      const client = await connection();
      // The id does not name its shard: every shard is asked, in parallel.
      const read = shards.map((s) => s.store(client).get(dispatchId));
      const records = await Promise.all(read).catch((err: unknown) => {
        throw asRedisFailure(err, redis);
      });
      const record = records.find((r) => r !== undefined);
      return record ? describeDispatch(record) : null;
    },
    async cancel(dispatchId) {
      const client = await connection();
      // The id does not name its shard: the shard that holds the record is the one to end it in.
      const found = await Promise.all(shards.map((s) => s.store(client).get(dispatchId))).catch(
        (err: unknown) => {
          throw asRedisFailure(err, redis);
        },
      );
      const shard = shards[
        Math.max(
          0,
          found.findIndex((r) => r !== undefined),
        )
      ] as ProducerShard;
      return cancelFollowUp({ store: shard.store(client), queue: shard.queue }, dispatchId).catch(
        (err: unknown) => {
          throw asRedisFailure(err, redis);
        },
      );
    },
    close() {
      closing ??= (async () => {
        await Promise.all(shards.map((s) => s.queue.close()));
        if (!options.connection) redis.disconnect();
      })();
      return closing;
    },
  };
}

function withoutIndex({ field, message }: FieldProblem): FieldProblem {
  return { field, message };
}
