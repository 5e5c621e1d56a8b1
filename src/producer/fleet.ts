import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { DiskWait } from '../redis/disk-wait.js';
import { asRedisFailure, untilReady } from '../redis/failure.js';
import { keysFor, layoutKey, QUEUE_NAMES, queueOptions, shardLayout } from '../redis/keys.js';
import type { Shard } from '../redis/keys.js';
import { fleetShardCount, LayoutError } from '../redis/layout.js';
import type { DispatchJobData } from '../store/register.js';
import { DispatchStore, type StoreOptions } from '../store/store.js';

/**
 * The shards a tool (the producer, `createAdmin`) reaches, opened on first use: only then is the
 * shard count the fleet recorded known (`fleetShardCount`), and a tool without `DISPATCH_SHARDS`
 * must use that one, not a default that would act on shard 0 of a 4-shard fleet. Per shard its
 * BullMQ dispatch queue and its store, on the tool's one connection (a cluster sends each shard's
 * MULTI to the master of the shard's slot). How a batch is split across them, each shard's
 * transaction, and the answers merged back in input order, is `enqueue.ts`.
 */

/** Where the shards are and how many the caller expects. */
export interface FleetOptions {
  readonly prefix: string;
  readonly eventsStream: string;
  readonly cluster: boolean;
  /** `DISPATCH_SHARDS` as the caller set it; `undefined`: the count the fleet recorded. */
  readonly shards: number | undefined;
  /** The count when neither `shards` nor the fleet's record gives one. */
  readonly unsetShards: number;
  readonly ending: EndingOptions;
  /** How long a call waits for Redis to be reachable before it fails. */
  readonly readyTimeoutMs: number;
}

/** The shards of a tool, opened once. */
export interface Fleet {
  /**
   * Every shard, once Redis answered (at most `readyTimeoutMs`) and the layout was read. Rejects
   * with {@link LayoutError} when the setting and the fleet disagree, with
   * `RedisUnavailableError` when Redis does not answer; the next call tries again.
   */
  shards(): Promise<readonly ProducerShard[]>;
  /** Closes the queues opened so far. */
  close(): Promise<void>;
}

/** The {@link Fleet} of a tool on `redis`, its one connection. */
export function fleetOf(redis: Redis, options: FleetOptions): Fleet {
  let opening: Promise<ProducerShard[]> | undefined;
  let opened: ProducerShard[] = [];
  // Queues opened on a count no role had recorded yet: still open for calls under way.
  const retired: ProducerShard[] = [];
  // Whether `opened` rests on no record: the fleet may record another count at its start.
  let unrecorded = false;

  async function open(): Promise<ProducerShard[]> {
    try {
      await untilReady(redis, options.readyTimeoutMs);
      const { prefix, eventsStream, cluster } = options;
      const { count, recorded } = await fleetShardCount(redis, {
        cluster,
        prefix,
        configured: options.shards,
        unset: options.unsetShards,
      });
      unrecorded = !recorded;
      const layout = shardLayout(prefix, eventsStream, count, cluster);
      // Queue errors reach the caller through the rejected call.
      opened = openShards(redis, layout, () => {}, options.ending);
      return opened;
    } catch (err) {
      throw err instanceof LayoutError ? err : asRedisFailure(err, redis);
    }
  }

  /**
   * Forgets shards opened before the fleet recorded its count, once it has: kept, a producer
   * used before the workers' first start would go on writing where a 4-shard fleet never reads.
   */
  async function dropIfRecordedSince(): Promise<void> {
    if (!unrecorded || !opening) return;
    const since = (await redis.exists(layoutKey(options.prefix))) === 1;
    // Another call may have dropped them during the EXISTS.
    if (!since || !unrecorded) return;
    unrecorded = false;
    retired.push(...opened);
    opened = [];
    opening = undefined;
  }

  return {
    async shards() {
      await dropIfRecordedSince().catch((err: unknown) => {
        throw asRedisFailure(err, redis);
      });
      const current = (opening ??= open());
      current.catch(() => {
        if (opening === current) opening = undefined;
      });
      return current;
    },
    async close() {
      const all = [...retired, ...opened];
      await Promise.all(all.map((s) => s.queue.close().catch(() => {})));
    },
  };
}

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
