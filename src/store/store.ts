import type { Redis } from 'ioredis';
import { durably } from '../redis/disk-wait.js';
import type { Keys } from '../redis/keys.js';
import { acquireMany, MAX_ACQUIRES, type Acquire } from './acquire.js';
import { batched } from './call-batch.js';
import { finishMany, MAX_FINISHES, type Finish, type Finished } from './finish.js';
import { markMany, MARK_RETRY_ARG, MAX_MARKS, type Mark } from './mark-sent.js';
import { Claims } from './claims.js';
import { FollowupViews } from './followup-views.js';
import { defineScripts } from './lua.js';
import { OpenIndex } from './open-index.js';
import { OperatorViews } from './operator-views.js';
import { PollState } from './poll-state.js';
import { ProjectControls } from './project-controls.js';
import { Register } from './register.js';
import { SendPauses } from './send-pause.js';
import { Sends } from './sends.js';
import {
  RedisClock,
  type MarkResult,
  type StoreOptions,
  type StoreState,
  type Verdict,
} from './store-state.js';
import { Tracking } from './tracking.js';

export type {
  Claim,
  ClaimLock,
  JobPresence,
  QueueKey,
  RepairMove,
  RepairPass,
} from './poll-state.js';
export type { Registration } from './register.js';
export type { ClaimAnswer, ClaimRequest, FenceRequest } from './claims.js';
export { AUTH_PROBE_BACKOFF, parseSendPause, type SendPause } from './send-pause.js';
export type { DispatchRef, MarkResult, StoreOptions, Verdict } from './store-state.js';
export type { WriteRetry } from './call-batch.js';
export type { Finished } from './finish.js';
export type { Orphan, OrphanResult } from './tracking.js';
export { OPEN_WALK_START, type OpenDispatch } from './open-index.js';
export type { ProjectState } from './project-controls.js';
export type { EventView, OperatorViews, TrackedView } from './operator-views.js';
export type {
  DeadLetter,
  DeadLetterCursor,
  FollowupDetail,
  FollowupViews,
  OpenCounts,
  QueuedItem,
} from './followup-views.js';

/**
 * The dispatch records, lanes, budgets, parks, the send pause, the tracked set, the open index and
 * the poller's lock: every Redis read or write of them goes through one of the parts below, on
 * the store's one connection, keys and settings (private to them), and every state change of a
 * follow-up is one atomic script (see `lua.ts`). A caller calls the part it needs directly:
 * `store.acquire(...)`, `store.finish(...)`, `store.tracking.requeue(...)`. The three steps of
 * every follow-up (acquire, mark sent, finish) are batched per turn of the event loop and run in
 * their own files (`acquire.ts`, `mark-sent.ts`, `finish.ts`), reached with no method between.
 */
export class DispatchStore {
  /** REGISTER of the producer's follow-ups, inside its MULTI. */
  readonly register: Register;
  /** The claims of idempotency keys across shards, made before REGISTER. */
  readonly claims: Claims;
  /** The step before a send: lane, pauses, park, budget, then the intent (`acquire.ts`). */
  readonly acquire: (...acquire: Acquire) => Promise<Verdict>;
  /** A send's answer: its tracking starts (`mark-sent.ts`). */
  readonly markSent: (...mark: Mark) => Promise<MarkResult>;
  /** The end of a dispatch with its one event, and its lane's next (`finish.ts`). */
  readonly finish: (...finish: Finish) => Promise<Finished>;
  /** Reads of records and lanes. */
  readonly sends: Sends;
  /** The tracked set besides: a send's requeue, reschedules, orphan events. */
  readonly tracking: Tracking;
  /** The fleet-wide pause of every send after a rejected key. */
  readonly pause: SendPauses;
  /** The poller's own state: the tick's lock, its claims of due reads, the repair cursor, parks. */
  readonly poll: PollState;
  /** The index of dispatches not finished yet. */
  readonly open: OpenIndex;
  /** An operator's controls of a project: pause, resume, its own limit, `show`. */
  readonly projects: ProjectControls;
  /** What the operator's page reads besides: tracked follow-ups, the last events. */
  readonly views: OperatorViews;
  /** The follow-ups pages' reads that do not grow with the backlog, and a redrive's link. */
  readonly followups: FollowupViews;

  readonly #state: StoreState;

  constructor(redis: Redis, keys: Keys, options: StoreOptions) {
    const state: StoreState = {
      redis,
      keys,
      options,
      scripts: defineScripts(redis),
      clock: new RedisClock(),
    };
    this.register = new Register(state);
    this.claims = new Claims(state);
    this.acquire = batched(state, acquireMany, MAX_ACQUIRES);
    this.markSent = batched(state, markMany, MAX_MARKS, MARK_RETRY_ARG);
    this.finish = batched(state, finishMany, MAX_FINISHES);
    this.tracking = new Tracking(state);
    this.sends = new Sends(state);
    this.pause = new SendPauses(state);
    this.poll = new PollState(state);
    this.open = new OpenIndex(state);
    this.projects = new ProjectControls(state);
    this.views = new OperatorViews(state);
    this.followups = new FollowupViews(state);
    this.#state = state;
  }

  /**
   * Runs `write` (calls of this store) and, with `StoreOptions.durability`, resolves only once it
   * is on disk: for an operator's change (a cancel) that a crash must not undo once answered.
   * Throws `NotDurableError` after the write when that is not confirmed.
   */
  onDisk<T>(write: () => Promise<T>): Promise<T> {
    const { options, redis, keys } = this.#state;
    return durably(options.durability, redis, keys.tracked, write);
  }
}
