import type { ChainableCommander, Redis } from 'ioredis';
import type { Keys } from '../redis/keys.js';
import type { Ending } from './event.js';
import type { Registration } from './sends.js';
import { defineScripts, LUA } from './lua.js';
import { OperatorViews } from './operator-views.js';
import * as poll from './poll-state.js';
import { ProjectControls } from './project-controls.js';
import type { DispatchRecord, DispatchState } from './record.js';
import * as sends from './sends.js';
import * as pause from './send-pause.js';
import { RedisClock, type DispatchRef, type StoreOptions, type StoreState } from './store-state.js';
import * as tracking from './tracking.js';

export type { JobPresence, QueueKey } from './poll-state.js';
export type { MarkResult, Registration, Verdict } from './sends.js';
export { AUTH_PROBE_BACKOFF, parseSendPause, type SendPause } from './send-pause.js';
export type { DispatchRef, StoreOptions } from './store-state.js';
export type { Finished, OpenDispatch, Orphan, OrphanResult } from './tracking.js';
export type { ProjectState } from './project-controls.js';
export type { EventView, OperatorViews, TrackedView } from './operator-views.js';

/** A function of the store's modules as the facade offers it: the state is the facade's own. */
type WithoutState<F> = F extends (state: StoreState, ...args: infer A) => infer R
  ? (...args: A) => R
  : never;

/**
 * The dispatch records, lanes, budgets, parks, the send pause, the tracked set, the open index and
 * the poller's lock: every Redis read or write of them goes through here, and every state change
 * of a follow-up is one atomic script (see `lua.ts`). The methods live in `sends.ts`,
 * `tracking.ts`, `send-pause.ts`, `poll-state.ts` and (`projects`) `project-controls.ts`.
 */
export class DispatchStore {
  readonly #state: StoreState;
  /** An operator's controls of a project: pause, resume, its own limit, `show`. */
  readonly projects: ProjectControls;
  /** What the operator's page reads besides: tracked follow-ups, the last events. */
  readonly views: OperatorViews;

  constructor(redis: Redis, keys: Keys, options: StoreOptions) {
    this.#state = { redis, keys, options, scripts: defineScripts(redis), clock: new RedisClock() };
    this.projects = new ProjectControls(this.#state);
    this.views = new OperatorViews(this.#state);
  }

  /** Queues REGISTER on `multi`, a MULTI of this store's connection (see register-3.lua). */
  registerInto(multi: ChainableCommander, dispatchId: string, followUp: Registration): void {
    sends.registerInto(this.#state, multi, dispatchId, followUp);
  }

  /**
   * Queues SCRIPT LOAD of REGISTER and of `sources` (other scripts the transaction runs by SHA)
   * at the start of `multi`. Inside MULTI a NOSCRIPT (after SCRIPT FLUSH) would fail one command
   * and commit the rest; loaded in the same transaction, the scripts are there when they run.
   * Resolves to how many replies they add at the start.
   */
  loadScriptsInto(multi: ChainableCommander, sources: readonly string[] = []): number {
    const all = [LUA.register.source, ...sources];
    for (const source of all) multi.script('LOAD', source);
    return all.length;
  }

  /** Reads one dispatch record. */
  get(dispatchId: string): Promise<DispatchRecord | undefined> {
    return sends.get(this.#state, dispatchId);
  }

  /** Reads several records in one round trip, all but their prompts; missing: `undefined`. */
  getMany(ids: readonly string[]): Promise<(DispatchRecord | undefined)[]> {
    return sends.getMany(this.#state, ids);
  }

  /**
   * Checks lane, pauses, park and budget (the project's own limit replaces `rate`); when all allow
   * it, records the intent to send and tracks the dispatch (first read in `firstPollMs`). See
   * acquire-7.lua for `toleranceMs`, and why a retry with the same `attemptToken` spends nothing.
   */
  readonly acquire: WithoutState<typeof sends.acquire> = (...args) =>
    sends.acquire(this.#state, ...args);

  /** Records attempt `attemptToken`'s send as `sent`/`unsettled`, tracked, on disk. Idempotent. */
  readonly markSent: WithoutState<typeof sends.markSent> = (...args) =>
    sends.markSent(this.#state, ...args);

  /**
   * Returns a dispatch to `queued`, for attempt `attemptToken` only (`refund`: the request never
   * left; `parkMs`: park the project). Resolves to the park deadline (0: none), or why not.
   */
  readonly requeue: WithoutState<typeof sends.requeue> = (...args) =>
    sends.requeue(this.#state, ...args);

  /** Whether a dispatch is queued at the head of its lane, so it may be sent now. */
  isNext(ref: DispatchRef): Promise<boolean> {
    return sends.isNext(this.#state, ref);
  }

  /** Ends a dispatch with its one event, if it is in `expected` state (omitted: any but `done`). */
  finish(record: DispatchRecord, ending: Ending, expected?: DispatchState) {
    return tracking.finish(this.#state, record, ending, expected);
  }

  /**
   * Publishes the undeliverable event of a job without a record (an unreadable payload, a lost
   * record), once per job; not while the record exists, nor (`jobKey`) once the job is gone.
   */
  publishOrphan(o: tracking.Orphan, data: unknown, why: string): Promise<tracking.OrphanResult> {
    return tracking.publishOrphan(this.#state, o, data, why);
  }

  /** Sets the next status read of a tracked dispatch `delayMs` ahead; stores `fields` on it. */
  reschedule(
    dispatchId: string,
    delayMs: number,
    fields: Record<string, string | number> = {},
  ): Promise<boolean> {
    return tracking.reschedule(this.#state, dispatchId, delayMs, fields);
  }

  /** Claims at most `limit` tracked dispatches due for a read, for `leaseMs` (see DueReads). */
  due(limit: number, leaseMs: number): Promise<tracking.DueReads> {
    return tracking.due(this.#state, limit, leaseMs);
  }

  /** Stops tracking a dispatch (its record expired, or was never ours). */
  untrack(dispatchId: string): Promise<void> {
    return tracking.untrack(this.#state, dispatchId);
  }

  /**
   * Records that `bullJobId` now carries a queued dispatch, if its record still names `expected`
   * (see carry-1.lua; '' = whichever). Resolves to whether it was recorded.
   */
  carry(dispatchId: string, expected: string, bullJobId: string): Promise<boolean> {
    return tracking.carry(this.#state, dispatchId, expected, bullJobId);
  }

  /**
   * Reads up to `count` open dispatches, oldest first from `rank`, enqueued by `enqueuedBy` (never
   * the prompt), and whether the index holds more past this page.
   */
  openPage(
    rank: number,
    count: number,
    enqueuedBy: number,
  ): Promise<{ dispatches: tracking.OpenDispatch[]; more: boolean }> {
    return tracking.openPage(this.#state, rank, count, enqueuedBy);
  }

  /** How many dispatches are not finished yet: a change of shard count waits for 0. */
  openCount(): Promise<number> {
    return tracking.openCount(this.#state);
  }

  /** Removes dispatches from the open index (their record is gone or already done). */
  dropOpen(ids: readonly string[]): Promise<void> {
    return tracking.dropOpen(this.#state, ids);
  }

  /** Until when each project's status reads are backed off (0: not), in one MGET. */
  pollParks(projectIds: readonly string[]): Promise<Map<string, number>> {
    return tracking.pollParks(this.#state, projectIds);
  }

  /** Backs off a project's status reads for `delayMs` (a GET answered 429 or 5xx). */
  parkPolls(projectId: string, delayMs: number): Promise<void> {
    return tracking.parkPolls(this.#state, projectId, delayMs);
  }

  /**
   * Pauses every send of the fleet after `httpStatus` (401/403: the key; 3xx: `AGENT_API_URL`);
   * `started`: this call started it (and logs it); `probeAt`: when the next probe may go.
   */
  pauseSends(
    httpStatus: number,
    backoff: { firstBackoffMs: number; maxBackoffMs: number } = pause.AUTH_PROBE_BACKOFF,
  ): Promise<{ started: boolean; probeAt: number }> {
    return pause.pauseSends(this.#state, httpStatus, backoff);
  }

  /** Ends the pause of every send: whether it was paused, and the jobs it parked, to wake. */
  resumeSends(): Promise<{ resumed: boolean; parked: string[] }> {
    return pause.resumeSends(this.#state);
  }

  /** Notes a BullMQ job parked until the pause's next probe: the pause's end wakes it. */
  noteAuthParked(bullJobId: string): Promise<void> {
    return pause.noteParked(this.#state, bullJobId);
  }

  /** For a status read while sends are paused: `none`, `wait`, or `probe` (this caller probes). */
  claimProbe(): Promise<'none' | 'wait' | 'probe'> {
    return pause.claimProbe(this.#state);
  }

  /** The pause of every send, or `undefined` when sends are not paused. */
  sendPause(): Promise<pause.SendPause | undefined> {
    return pause.sendPause(this.#state);
  }

  /** Takes the poll tick's lock for `lockMs` as `token`, unless another tick holds it. */
  takePollLock(token: string, lockMs: number): Promise<boolean> {
    return poll.takePollLock(this.#state, token, lockMs);
  }

  /** Extends the poll tick's lock, if `token` still holds it. */
  renewPollLock(token: string, lockMs: number): Promise<boolean> {
    return poll.renewPollLock(this.#state, token, lockMs);
  }

  /** Releases the poll tick's lock, if `token` still holds it. */
  releasePollLock(token: string): Promise<boolean> {
    return poll.releasePollLock(this.#state, token);
  }

  /** The rank where the repair sweep goes on (a new pass: 0; not due: none), Redis's clock. */
  startRepairPass(graceMs: number): Promise<{ rank: number; nowMs: number } | undefined> {
    return poll.startRepairPass(this.#state, graceMs);
  }

  /** Records where the running repair pass goes on next (`undefined`: the pass is over). */
  moveRepairCursor(rank: number | undefined, graceMs: number): Promise<void> {
    return poll.moveRepairCursor(this.#state, rank, graceMs);
  }

  /**
   * Whether each BullMQ job exists and has not ended (in the completed or failed set since before
   * `endedBy`), in one pipeline. `queueKey` is the dispatch queue's `toKey`.
   */
  jobPresence(
    queueKey: poll.QueueKey,
    bullJobIds: readonly string[],
    endedBy: number,
  ): Promise<poll.JobPresence[]> {
    return poll.jobPresence(this.#state, queueKey, bullJobIds, endedBy);
  }
}
