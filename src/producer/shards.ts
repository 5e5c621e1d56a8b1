import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import { DispatchStore } from '../dispatch/store.js';
import {
  assessDurability,
  connectionOf,
  NotDurableError,
  probeServer,
  waitForDisk,
  type DurabilityAssessment,
  type DurabilitySetting,
} from '../redis/durability.js';
import { keysFor, QUEUE_NAMES, queueOptions, shardOf, type Shard } from '../redis/keys.js';
import type { DispatchJobData } from '../runtime/jobs.js';
import { asRedisFailure, IdempotencyConflictError, RedisUnavailableError } from './errors.js';
import type { KeyConflict, SendResult } from './errors.js';
import { addMissingJobs, buildTransaction, execute, resultsOf } from './transaction.js';

/**
 * The producer's shards and how a batch is enqueued across them: per shard its BullMQ dispatch
 * queue and its store, on the producer's one connection (a cluster sends each shard's MULTI to the
 * master of the shard's slot). A batch is split by the shard of each project, one transaction per
 * shard (`transaction.ts`), each followed by its wait for the disk; the answers are merged back in
 * input order.
 */

/** One shard as the producer writes it. */
export interface ProducerShard {
  readonly shard: Shard;
  readonly queue: Queue<DispatchJobData>;
  /** The store on BullMQ's client of the queue (see `storeOn`). */
  store(client: Redis): DispatchStore;
}

/** What a shard's store needs to end a follow-up (the producer's `cancel`). */
export interface EndingOptions {
  readonly eventsMaxLen: number;
  readonly retentionMs: number;
}

/** Opens the queue of every shard on `redis`; `onError` listens to each queue's errors. */
export function openShards(
  redis: Redis,
  layout: readonly Shard[],
  onError: (err: Error) => void,
  ending: EndingOptions,
): ProducerShard[] {
  return layout.map((shard) => {
    const queue = new Queue<DispatchJobData>(QUEUE_NAMES.dispatch, {
      connection: redis,
      ...queueOptions(shard.prefix),
    });
    queue.on('error', onError);
    let store: DispatchStore | undefined;
    return {
      shard,
      queue,
      store: (client) =>
        (store ??= new DispatchStore(client, keysFor(shard.prefix), {
          eventsStream: shard.eventsStream,
          ...ending,
        })),
    };
  });
}

/** The follow-ups of a batch that go to one shard, with their positions in the batch. */
export interface ShardBatch {
  readonly shard: number;
  readonly indexes: number[];
  readonly followUps: FollowUp[];
}

/** Splits a batch by the shard of each follow-up's project, keeping input order within each. */
export function splitByShard(followUps: readonly FollowUp[], count: number): ShardBatch[] {
  const batches = new Map<number, ShardBatch>();
  for (const [index, followUp] of followUps.entries()) {
    const shard = shardOf(followUp.projectId, count);
    let batch = batches.get(shard);
    if (!batch) batches.set(shard, (batch = { shard, indexes: [], followUps: [] }));
    batch.indexes.push(index);
    batch.followUps.push(followUp);
  }
  return [...batches.values()];
}

/**
 * Puts the answers of each shard's transaction back in input order. A key conflict in any shard
 * becomes one {@link IdempotencyConflictError} for the batch, with batch indexes, after every
 * shard committed; any other failure is rethrown (the first one).
 */
export function mergeShardResults(
  total: number,
  batches: readonly ShardBatch[],
  settled: readonly PromiseSettledResult<SendResult[]>[],
): SendResult[] {
  const results: (SendResult | null)[] = new Array<SendResult | null>(total).fill(null);
  const conflicts: KeyConflict[] = [];
  for (const [i, outcome] of settled.entries()) {
    const batch = batches[i];
    if (!batch) continue;
    if (outcome.status === 'rejected') {
      if (!(outcome.reason instanceof IdempotencyConflictError)) throw outcome.reason;
      const err = outcome.reason;
      err.results.forEach((r, j) => (results[batch.indexes[j] ?? 0] = r));
      for (const c of err.conflicts)
        conflicts.push({ ...c, index: batch.indexes[c.index ?? 0] ?? 0 });
    } else {
      outcome.value.forEach((r, j) => (results[batch.indexes[j] ?? 0] = r));
    }
  }
  if (conflicts.length > 0) throw new IdempotencyConflictError(conflicts, results);
  return results as SendResult[];
}

/** What enqueueing needs besides the batch: the producer's connection, its attempts, the disk. */
export interface EnqueueContext {
  /** The producer's connection, whose state tells a Redis failure's kind. */
  readonly redis: Redis;
  readonly attempts: number;
  readonly disk: DiskGuard;
}

/**
 * Enqueues a batch on `client` (BullMQ's connection, ready): one transaction per shard, in
 * parallel, each waited on disk; answers in input order (see {@link mergeShardResults}).
 */
export async function enqueueByShard(
  ctx: EnqueueContext,
  client: Redis,
  shards: readonly ProducerShard[],
  followUps: readonly FollowUp[],
  traceparents: readonly (string | undefined)[],
): Promise<SendResult[]> {
  const assessment = await ctx.disk.assess(client);
  const batches = splitByShard(followUps, shards.length);
  const settled = await Promise.allSettled(
    batches.map((b) =>
      enqueueIn(
        ctx,
        client,
        assessment,
        shards[b.shard] as ProducerShard,
        b.followUps,
        b.indexes.map((i) => traceparents[i]),
      ),
    ),
  );
  return mergeShardResults(followUps.length, batches, settled);
}

/** One shard's transaction: REGISTER and the job add of each follow-up, then the disk. */
async function enqueueIn(
  { redis, attempts, disk }: EnqueueContext,
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
  await disk.onDisk(client, assessment, wroteOn);
  return resultsOf(followUps, transaction, replies, redis);
}

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
   * Waits until what connection `wroteOn` wrote is on disk (WAITAOF on it). A timeout is a
   * retryable failure: the follow-ups may or may not be kept, so retry with the same key.
   */
  onDisk(client: Redis, assessment: DurabilityAssessment, wroteOn: number): Promise<void>;
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
    async onDisk(client, assessment, wroteOn) {
      try {
        await waitForDisk(client, assessment, timeoutMs, wroteOn);
      } catch (err) {
        throw err instanceof NotDurableError
          ? new RedisUnavailableError(`${err.message}; retry with the same key`, err)
          : asRedisFailure(err, redis);
      }
    },
  };
}
