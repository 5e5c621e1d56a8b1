import type { Redis } from 'ioredis';
import type { Rate } from '../config/index.js';
import type { DurabilitySetting } from '../config/durability.js';
import type { CancelResult, ProjectView } from './controls.js';
import type { DeadLetter, FollowupDetail } from '../store/store.js';
import type { Overview, OverviewOptions } from './overview.js';
import type { DeadLetterFilter } from './followup-lookup.js';
import type { NotRedrivableError, RedriveOutcome, RedriveResult } from './redrive.js';
import type { RedriveFilter } from './redrive-filter.js';

/* The operator controls' public shape (contract, section 4: `createAdmin`); `admin.ts` builds it. */

/**
 * Options of {@link createAdmin}. An option named after a setting defaults to that setting's default
 * (docs/reference/settings.md), as `LIBRARY_DEFAULTS`, exported by the package, holds it.
 */
export interface AdminOptions {
  redisUrl: string;
  /** `DISPATCH_PREFIX`. @defaultValue `LIBRARY_DEFAULTS.prefix` */
  prefix?: string;
  /** `EVENTS_STREAM`, where a cancel's event goes. @defaultValue `LIBRARY_DEFAULTS.eventsStream` */
  eventsStream?: string;
  /** `EVENTS_MAXLEN`. @defaultValue `LIBRARY_DEFAULTS.eventsMaxLen` */
  eventsMaxLen?: number;
  /** `DISPATCH_RETENTION` of a cancelled follow-up's record, in ms. @defaultValue `LIBRARY_DEFAULTS.dispatchRetentionMs` */
  dispatchRetentionMs?: number;
  /**
   * `SEND_RATE_LIMIT`, which `showProject` reports for a project without a limit of its own.
   * @defaultValue `LIBRARY_DEFAULTS.sendRateLimit`
   */
  sendRateLimit?: string | Rate;
  /** An existing connection to use instead of `redisUrl` (not closed by `close`). */
  connection?: Redis;
  /** How long a call waits for Redis to be reachable before it fails. @defaultValue 5000 */
  readyTimeoutMs?: number;
  /**
   * `DISPATCH_SHARDS`: a project's controls live in its shard. Unset: the count the fleet
   * recorded in Redis (1 when none did); set: a count that differs from the record rejects every
   * call with `LayoutError` (code `layout_mismatch`), having changed nothing.
   * @defaultValue the fleet's recorded count, else `LIBRARY_DEFAULTS.shards`
   */
  shards?: number;
  /** `REDIS_CLUSTER`: `redisUrl` is the seed node of a Redis Cluster. @defaultValue `LIBRARY_DEFAULTS.cluster` */
  cluster?: boolean;
  /**
   * `REDIS_DURABILITY`: with `fsync` (the default) on a server that has WAITAOF, a cancel, pause,
   * resume or limit answers only once fsynced to the AOF, as `send` does, so a Redis crash cannot
   * undo a change the caller was told about. `strict` refuses every change, before any write,
   * with `NotDurableError` where the server cannot keep that promise.
   * @defaultValue `LIBRARY_DEFAULTS.durability`
   */
  durability?: DurabilitySetting;
  /** How long a change waits for the disk (WAITAOF) before it fails, retryable. @defaultValue 5000 */
  durabilityTimeoutMs?: number;
}

/** The answer of a pause or resume; `changed` is false when the project already was so. */
export interface PauseResult {
  readonly projectId: string;
  readonly paused: boolean;
  readonly changed: boolean;
  /** Follow-ups the resume woke (0 for a pause). */
  readonly woken: number;
}

/** The answer of a limit change: the limit now (`null`: `SEND_RATE_LIMIT`) and the one before. */
export interface LimitResult {
  readonly projectId: string;
  readonly limit: string | null;
  readonly previous: string | null;
}

/** The answer of an unpark: the 429 park it cleared (`null`: the project was not parked). */
export interface UnparkResult {
  readonly projectId: string;
  /** When the park would have ended, ISO 8601; `null`: none was in force. */
  readonly parkedUntil: string | null;
  readonly changed: boolean;
  /** Follow-ups waiting out the park that the unpark woke. */
  readonly woken: number;
}

/** Options of {@link Admin.setProjectLimit}. */
export interface LimitOptions {
  /** Sets a limit looser than `SEND_RATE_LIMIT` (the agent API's own) all the same. */
  readonly force?: boolean;
}

/**
 * The operator controls (contract, section 4). Each change is one atomic script that every
 * worker's next ACQUIRE reads, so it holds fleet-wide at once. Input errors throw
 * `InvalidControlError` naming the field (`projectId`, `limit`, `dispatchId`); an unknown project
 * is fine (a control may come before its follow-ups).
 */
export interface Admin {
  /** Stops every send to the project: no attempt, no budget spent; its follow-ups wait. */
  pauseProject(projectId: string): Promise<PauseResult>;
  /** Resumes the project and wakes its parked follow-ups at once. */
  resumeProject(projectId: string): Promise<PauseResult>;
  /**
   * Gives the project its own limit, `N/DURATION` (`50/1h`), in place of `SEND_RATE_LIMIT`: a
   * count of at least 1, a window of at most 24 h, and no looser than `SEND_RATE_LIMIT` (no
   * window of its length may hold more sends) unless `force` (see `checkLimit`).
   */
  setProjectLimit(projectId: string, limit: string, options?: LimitOptions): Promise<LimitResult>;
  /** Back to `SEND_RATE_LIMIT`. */
  clearProjectLimit(projectId: string): Promise<LimitResult>;
  /**
   * Clears the project's 429 park (the agent API's own window still applies: a 429 parks it
   * again) and wakes the follow-ups waiting it out; they send within the project's budget.
   */
  unparkProject(projectId: string): Promise<UnparkResult>;
  /** Paused or not, its limit and budget use, its next slot, its 429 park, its counts. */
  showProject(projectId: string): Promise<ProjectView>;
  /** The contract's name of {@link Admin.showProject}. */
  project(projectId: string): Promise<ProjectView>;
  /** The projects with a pause or a limit of their own. */
  controlledProjects(): Promise<string[]>;
  /** Everything the operator's page shows at once (`/dashboard/followups`). */
  overview(options?: OverviewOptions): Promise<Overview>;
  /** `producer.cancel`: ends a queued follow-up `followup.cancelled`. */
  cancel(dispatchId: string): Promise<CancelResult>;
  /**
   * Sends a dead letter (ended undeliverable or timed out) again as a new follow-up (see
   * `redrive.ts`); a second redrive of the same one answers the first's follow-up, `created`
   * false. Throws `NotRedrivableError` naming why (`unknown`, `not_ended`, `not_dead_letter`,
   * `prompt_gone`, `job_not_created`), having changed nothing.
   */
  redrive(dispatchId: string): Promise<RedriveResult>;
  /**
   * {@link Admin.redrive} of several, in one batch in their original order; each answered with
   * its result or its `NotRedrivableError`, in the order given.
   */
  redriveMany(dispatchIds: readonly string[]): Promise<(RedriveResult | NotRedrivableError)[]>;
  /**
   * Redrives the dead letters `filter` chooses (`POST /v1/redrive`, `agent-dispatch redrive`):
   * its `dispatchIds`, or those that match `project`, `reason` and `since` (ended at or after it),
   * oldest end first, at most `limit` (100; at most 10,000: `redriveEach` has no bound), each page
   * of 500 in one batch; those that ended `ambiguous` or `stuck_sending` only when `reason` names
   * it. With `dryRun`, answers what would be redriven and sends nothing.
   * Throws `InvalidControlError` naming a bad field (an unknown one too).
   */
  redriveDeadLetters(filter?: RedriveFilter): Promise<RedriveOutcome[]>;
  /**
   * {@link Admin.redriveDeadLetters} a page at a time, each redriven before the next is read: for
   * long runs, holding one page whatever the number redriven; `limit` has no upper bound.
   */
  redriveEach(filter?: RedriveFilter): AsyncIterable<RedriveOutcome[]>;
  /** The dead letters kept for a redrive that match `filter`, newest first. */
  deadLetters(filter?: DeadLetterFilter): Promise<DeadLetter[]>;
  /** One follow-up (its record without the prompt, its event, its redrive links), or null. */
  followUp(dispatchId: string): Promise<FollowupDetail | null>;
  /**
   * The follow-ups `text` names: a dispatch id, an idempotency key, or an agent job id (its open
   * follow-ups and its dead letters among the newest 500).
   */
  search(text: string): Promise<string[]>;
  close(): Promise<void>;
}
