import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import type { DiskWait } from '../redis/disk-wait.js';
import { DispatchStore } from '../dispatch/store.js';
import { keysFor, QUEUE_NAMES, queueOptions, shardOf, type Shard } from '../redis/keys.js';
import { newDispatchId, type DispatchJobData } from '../runtime/jobs.js';
import { asRedisFailure, IdempotencyConflictError } from './errors.js';
import type { KeyConflict, SendResult } from './errors.js';
import { enqueueIn, type EnqueueContext } from './transaction.js';

/**
 * The producer's shards and how a batch is enqueued across them: per shard its BullMQ dispatch
 * queue and its store, on the producer's one connection (a cluster sends each shard's MULTI to the
 * master of the shard's slot). A batch is split by the shard of each project, one transaction per
 * shard (`transaction.ts`, with its wait for the disk); the answers are merged back in input
 * order.
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
 * The follow-ups of a batch whose idempotency key is taken in another shard than their project's:
 * a key derives its dispatch id (`newDispatchId`), and REGISTER, which refuses a key used for
 * other content, sees its own shard only. A key taken in another shard was sent for another
 * project, so other content: a conflict, as it is on one shard. Read before the MULTIs (every
 * shard's records of the keyed ids, one pipelined read per shard, in parallel), and within the
 * batch the first shard a key appears in holds it. What this cannot see: another producer
 * registering the same key for a project of another shard between this read and the MULTI.
 * Nothing is read with one shard or without keys.
 */
export async function keysTakenElsewhere(
  client: Redis,
  shards: readonly ProducerShard[],
  followUps: readonly FollowUp[],
): Promise<KeyConflict[]> {
  const keyed = followUps.flatMap(({ key, projectId }, index) =>
    key === undefined || shards.length === 1
      ? []
      : [{ index, key, dispatchId: newDispatchId(key), shard: shardOf(projectId, shards.length) }],
  );
  if (keyed.length === 0) return [];
  const ids = [...new Set(keyed.map((k) => k.dispatchId))];
  const found = await Promise.all(shards.map((s) => s.store(client).sends.getMany(ids)));
  const holder = new Map<string, number>();
  for (const [shard, records] of found.entries())
    for (const [i, record] of records.entries())
      if (record && !holder.has(ids[i] ?? '')) holder.set(ids[i] ?? '', shard);
  const conflicts: KeyConflict[] = [];
  for (const { index, key, dispatchId, shard } of keyed) {
    const home = holder.get(dispatchId);
    if (home === undefined) holder.set(dispatchId, shard);
    else if (home !== shard) conflicts.push({ index, key, dispatchId });
  }
  return conflicts;
}

/**
 * Puts the answers of each shard's transaction back in input order. A key conflict in any shard,
 * or one `refused` before the transactions (see {@link keysTakenElsewhere}), becomes one
 * {@link IdempotencyConflictError} for the batch, with batch indexes, after every shard
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

/**
 * Enqueues a batch on `client` (BullMQ's connection, ready): one transaction per shard, in
 * parallel, each waited on disk (`enqueueIn`); answers in input order (see
 * {@link mergeShardResults}).
 */
export async function enqueueByShard(
  ctx: EnqueueContext,
  client: Redis,
  shards: readonly ProducerShard[],
  followUps: readonly FollowUp[],
  traceparents: readonly (string | undefined)[],
): Promise<SendResult[]> {
  // Before any read or write: a strict setting the server cannot keep refuses the batch.
  const assessed = await ctx.disk.assess(client);
  const taken = await keysTakenElsewhere(client, shards, followUps).catch((err: unknown) => {
    throw asRedisFailure(err, ctx.redis);
  });
  const batches = splitByShard(followUps, shards.length, new Set(taken.map((c) => c.index ?? -1)));
  const settled = await Promise.allSettled(
    batches.map((b) => {
      const { queue, store, shard } = shards[b.shard] as ProducerShard;
      const target = { queue, store: store(client), nodeKey: keysFor(shard.prefix).open };
      const tps = b.indexes.map((i) => traceparents[i]);
      return enqueueIn(ctx, client, assessed, target, b.followUps, tps);
    }),
  );
  return mergeShardResults(followUps.length, batches, settled, taken);
}
