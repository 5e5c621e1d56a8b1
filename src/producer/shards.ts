import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { DiskWait } from '../redis/disk-wait.js';
import { DispatchStore, type StoreOptions } from '../store/store.js';
import { keysFor, QUEUE_NAMES, queueOptions, type Shard } from '../redis/keys.js';
import type { DispatchJobData } from '../store/register.js';

/**
 * The producer's shards: per shard its BullMQ dispatch queue and its store, on the producer's one
 * connection (a cluster sends each shard's MULTI to the master of the shard's slot). How a batch
 * is split across them, each shard's transaction, and the answers merged back in input order, is
 * `enqueue.ts`.
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
  /** `PROJECT_BACKLOG_MAX` and the rate of its retry estimate (see `StoreOptions.backlog`). */
  readonly backlog?: StoreOptions['backlog'];
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
