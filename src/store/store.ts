import type { Redis } from 'ioredis';
import { durably } from '../redis/disk-wait.js';
import type { Keys } from '../redis/keys.js';
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
import { RedisClock, type StoreOptions, type StoreState } from './store-state.js';
import { Tracking } from './tracking.js';

export type { Claim, ClaimLock, JobPresence, QueueKey } from './poll-state.js';
export type { Registration } from './register.js';
export type { ClaimAnswer, ClaimRequest, FenceRequest } from './claims.js';
export { AUTH_PROBE_BACKOFF, parseSendPause, type SendPause } from './send-pause.js';
export type { DispatchRef, MarkResult, StoreOptions, Verdict, WriteRetry } from './store-state.js';
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
 * `store.sends.acquire(...)`, `store.tracking.finish(...)`.
 */
export class DispatchStore {
  /** REGISTER of the producer's follow-ups, inside its MULTI. */
  readonly register: Register;
  /** The claims of idempotency keys across shards, made before REGISTER. */
  readonly claims: Claims;
  /** Records and lanes, and the step before a send: acquire. */
  readonly sends: Sends;
  /** The tracked set: a send's answer (mark sent) or its requeue, and the end with its event. */
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
    this.tracking = new Tracking(state);
    this.sends = new Sends(state, this.tracking);
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
