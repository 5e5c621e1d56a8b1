import type { Queue } from 'bullmq';
import type { ChainableCommander, Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import type { DispatchJobData } from '../store/register.js';
import type { DispatchStore, Registration } from '../store/store.js';
import type { DiskGuard } from './disk.js';

/**
 * The shapes of a batch on its way from the producer to Redis (`enqueue.ts` moves it): what
 * enqueueing needs, the batch's part for one shard, where that part's transaction goes, and the
 * transaction itself.
 */

/** What enqueueing needs besides the batch: the producer's connection, its attempts, the disk. */
export interface EnqueueContext {
  /** The producer's connection, whose state tells a Redis failure's kind. */
  readonly redis: Redis;
  readonly attempts: number;
  readonly disk: DiskGuard;
}

/** The follow-ups of a batch that go to one shard, with their positions in the batch. */
export interface ShardBatch {
  readonly shard: number;
  readonly indexes: number[];
  readonly followUps: FollowUp[];
}

/** Where one shard's transaction goes: its queue, its store on `client`, and a key of it. */
export interface ShardTarget {
  readonly queue: Queue<DispatchJobData>;
  readonly store: DispatchStore;
  /** A key of the shard: in a cluster, it names the node whose disk is waited for. */
  readonly nodeKey: string;
}

/**
 * A MULTI ready to EXEC: its ids, the replies before REGISTER's, its REGISTER calls (one per
 * thousand follow-ups, an answer per id each, in order); add `i` replies `registers + i` later.
 */
export interface Transaction {
  readonly multi: ChainableCommander;
  readonly ids: readonly string[];
  readonly loads: number;
  readonly registers: number;
  /** What REGISTER wrote for each id, in order: the follow-up and its `traceparent`. */
  readonly registrations: readonly Registration[];
}

/** The replies of a MULTI, in order: each an error or an answer. */
export type Replies = [Error | null, unknown][];
