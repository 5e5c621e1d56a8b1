import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import type { DiskWait } from '../redis/disk-wait.js';
import { DispatchStore } from '../store/store.js';
import { keysFor, QUEUE_NAMES, queueOptions, shardOf, type Shard } from '../redis/keys.js';
import type { DispatchJobData } from '../store/register.js';
import { IdempotencyConflictError } from './errors.js';
import type { KeyConflict, SendResult } from './errors.js';

/**
 * The producer's shards and how a batch is enqueued across them: per shard its BullMQ dispatch
 * queue and its store, on the producer's one connection (a cluster sends each shard's MULTI to the
 * master of the shard's slot). A batch is split by the shard of each project, one transaction per
 * shard (`enqueue.ts`, `transaction.ts`, with its wait for the disk); the answers are merged back
 * in input order.
 */

/** One shard as the producer writes it. */
export interface ProducerShard {
  readonly shard: Shard;
  readonly queue: Queue<DispatchJobData>;
  /** The store on BullMQ's client of the queue (see `storeOn`). */
  store(client: Redis): DispatchStore;
}

/** What a shard's store needs to end a follow-up (`cancel`) and to change a control. */
export interface EndingOptions {
  readonly eventsMaxLen: number;
  readonly retentionMs: number;
  /** The wait for the disk before a cancel or a control answers (`REDIS_DURABILITY`). */
  readonly durability?: DiskWait;
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

/**
 * Splits a batch by the shard of each follow-up's project, keeping input order within each, and
 * leaving out the positions in `refused`.
 */
export function splitByShard(
  followUps: readonly FollowUp[],
  count: number,
  refused: ReadonlySet<number> = new Set(),
): ShardBatch[] {
  const batches = new Map<number, ShardBatch>();
  for (const [index, followUp] of followUps.entries()) {
    if (refused.has(index)) continue;
    const shard = shardOf(followUp.projectId, count);
    let batch = batches.get(shard);
    if (!batch) batches.set(shard, (batch = { shard, indexes: [], followUps: [] }));
    batch.indexes.push(index);
    batch.followUps.push(followUp);
  }
  return [...batches.values()];
}

/**
 * Puts the answers of each shard's transaction back in input order. A key conflict in any shard,
 * or one `refused` before the transactions (a key claimed for another shard, `claims.ts`),
 * becomes one {@link IdempotencyConflictError} for the batch, with batch indexes, after every shard
 * committed; any other failure is rethrown (the first one).
 */
export function mergeShardResults(
  total: number,
  batches: readonly ShardBatch[],
  settled: readonly PromiseSettledResult<SendResult[]>[],
  refused: readonly KeyConflict[] = [],
): SendResult[] {
  const results: (SendResult | null)[] = new Array<SendResult | null>(total).fill(null);
  const conflicts: KeyConflict[] = [...refused];
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
  conflicts.sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
  if (conflicts.length > 0) throw new IdempotencyConflictError(conflicts, results);
  return results as SendResult[];
}
