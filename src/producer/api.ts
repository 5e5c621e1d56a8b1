import type { Redis } from 'ioredis';
import type { CreateInput, DispatchInput } from '../dispatch/creation.js';
import type { DispatchStatus } from '../dispatch/status.js';
import type { DurabilitySetting } from '../config/durability.js';
import type { Rate } from '../config/units.js';
import type { CancelResult } from './controls.js';
import type { SendResult } from './errors.js';

/* The producer library's public shape (contract, section 4); `producer.ts` builds it. */

/**
 * Options of {@link createProducer}. An option named after a setting defaults to that setting's default
 * (docs/reference/settings.md), as `LIBRARY_DEFAULTS`, exported by the package, holds it.
 */
export interface ProducerOptions {
  redisUrl: string;
  /** `DISPATCH_PREFIX`. @defaultValue `LIBRARY_DEFAULTS.prefix` */
  prefix?: string;
  /** `PROMPT_MAX_BYTES`. @defaultValue `LIBRARY_DEFAULTS.promptMaxBytes` */
  promptMaxBytes?: number;
  /**
   * `PROJECT_BACKLOG_MAX`: a send that would take a project's follow-ups not yet sent past it
   * rejects with `BacklogFullError`, nothing of it enqueued. @defaultValue no limit
   */
  projectBacklogMax?: number;
  /**
   * `SEND_RATE_LIMIT`, as `N/DURATION` or parsed: the rate `BacklogFullError.retryAfterMs`
   * assumes for a project without a limit of its own. @defaultValue `LIBRARY_DEFAULTS.sendRateLimit`
   */
  sendRateLimit?: string | Rate;
  /** `SEND_ATTEMPTS`: for transient failures, stored on each job. @defaultValue `LIBRARY_DEFAULTS.sendAttempts` */
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
   * @defaultValue `LIBRARY_DEFAULTS.durability`
   */
  durability?: DurabilitySetting;
  /**
   * `DISPATCH_SHARDS`. Unset: the count the fleet recorded in Redis when its roles started (1
   * when none did); set: checked against that record on the first call, which rejects with
   * `LayoutError` (code `layout_mismatch`, `setting` `DISPATCH_SHARDS`) when they differ.
   * @defaultValue the fleet's recorded count, else `LIBRARY_DEFAULTS.shards`
   */
  shards?: number;
  /** `REDIS_CLUSTER`: `redisUrl` is the seed node of a Redis Cluster. @defaultValue `LIBRARY_DEFAULTS.cluster` */
  cluster?: boolean;
  /** How long `send` waits for the disk (WAITAOF) before it fails, retryable. @defaultValue 5000 */
  durabilityTimeoutMs?: number;
  /** `EVENTS_STREAM`, where `cancel`'s event goes. @defaultValue `LIBRARY_DEFAULTS.eventsStream` */
  eventsStream?: string;
  /** `EVENTS_MAXLEN`. @defaultValue `LIBRARY_DEFAULTS.eventsMaxLen` */
  eventsMaxLen?: number;
  /**
   * `DISPATCH_RETENTION`, in ms: of a cancelled follow-up's record, and, with several shards, of
   * a key's claim (twice it), which must outlive the record: give the fleet's value.
   * @defaultValue `LIBRARY_DEFAULTS.dispatchRetentionMs`
   */
  dispatchRetentionMs?: number;
}

/** The producer library (contract, section 4). */
export interface Producer {
  /**
   * Validates and enqueues one follow-up; throws {@link InvalidFollowUpError} naming the field,
   * {@link IdempotencyConflictError} when its key was used for a different follow-up, and
   * {@link RedisUnavailableError} when Redis is unreachable.
   */
  send(followUp: DispatchInput): Promise<SendResult>;
  /**
   * Validates all (any invalid: nothing is enqueued), then enqueues all in one round trip per
   * shard, atomically per shard; results in input order. A key conflict rejects only its own item:
   * the others are enqueued, and the {@link IdempotencyConflictError} carries their results.
   */
  sendMany(followUps: readonly DispatchInput[]): Promise<SendResult[]>;
  /**
   * Creates an agent job through the pipeline, budgeted like a send; its one event is `job.*`
   * and carries the new job's id. Follow-ups sent with `after: dispatchId` (or its key) wait for
   * its first run to end, then go to the new job (docs/creations.md).
   */
  create(input: CreateInput): Promise<SendResult>;
  /** The state of a dispatch, or `null` when unknown or expired. */
  status(dispatchId: string): Promise<DispatchStatus | null>;
  /**
   * Ends a follow-up not sent yet with one `followup.cancelled` event (a creation:
   * `job.cancelled`), and hands its lane on.
   * Throws {@link NotCancellableError} (being sent, sent, finished) or {@link UnknownDispatchError},
   * having changed nothing.
   */
  cancel(dispatchId: string): Promise<CancelResult>;
  close(): Promise<void>;
}
