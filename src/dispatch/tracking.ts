import type { AgentJob } from '../agent-api/index.js';
import { afterWrite, beforeWrite, notOnDisk } from '../redis/disk-wait.js';
import type { DispatchState, DispatchRecord } from './record.js';
import { eventFields, orphanEventFields, type Ending } from './event.js';
import {
  laneOf,
  retryWrite,
  type DispatchRef,
  type MarkResult,
  type StoreState,
  type WriteRetry,
} from './store-state.js';

/**
 * The store's tracked set (sent dispatches whose agent job the poller reads): a send's answer
 * starts its tracking (`markSent`, see markSent-2.lua), a refused send goes back to the queue
 * (`requeue`, see requeue-4.lua), and the end of a dispatch publishes its one event (`finish`).
 * `markSent` and `requeue` act for one attempt only (its token), so running one twice finds its
 * own state. Reached as `DispatchStore.tracking`.
 */

/**
 * What FINISH did: whether this call ended the dispatch, the lane's next dispatch, and when it did
 * not, the state it found (`undefined`: no record).
 */
export interface Finished {
  readonly finished: boolean;
  readonly nextDispatchId: string | undefined;
  readonly found?: DispatchState | undefined;
}

/** The job an orphan event is for; with `jobKey`, only while that BullMQ job hash exists. */
export interface Orphan {
  readonly bullJobId: string;
  readonly dispatchId: string;
  readonly jobKey?: string;
}

/** What publishing an orphan event did: see publishOrphan-5.lua. */
export type OrphanResult = 'published' | 'published-before' | 'record-exists' | 'job-gone';

/** The tracked set and the ends of one store: `DispatchStore.tracking`. */
export class Tracking {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /**
   * Records attempt `attemptToken`'s send as `sent`/`unsettled`, tracked, on disk. Idempotent, so
   * retried by `retry` when given.
   */
  async markSent(
    ref: DispatchRef,
    newState: 'sent' | 'unsettled',
    job: AgentJob | undefined,
    firstDelayMs: number,
    attemptToken: string,
    retry?: WriteRetry,
  ): Promise<MarkResult> {
    return retryWrite(retry, async () => {
      const state = this.#state;
      const connection = await beforeWrite(
        state.options.durability,
        state.redis,
        state.keys.tracked,
      );
      const reply = await state.scripts.run(
        'markSent',
        [state.keys.dispatch(ref.dispatchId), state.keys.tracked],
        [
          ref.dispatchId,
          newState,
          job ? JSON.stringify(job) : '',
          job?.status ?? '',
          job?.status === 'active' ? '1' : '0',
          Math.max(1, Math.round(firstDelayMs)),
          attemptToken,
          state.clock.inMs(firstDelayMs) ?? 0,
        ],
      );
      const result = reply === 1 ? 'marked' : reply === 0 ? 'moved-on' : 'stale';
      // The answer must be on disk before the BullMQ job completes: a crash that took it back while
      // the job's completion (resent by ioredis after the reconnect) survived would leave the
      // dispatch `sending` with no job left to settle it. Run again, MARK_SENT finds its own state.
      if (result === 'marked') await afterWrite(state.options.durability, connection);
      return result;
    });
  }

  /**
   * Returns a dispatch to `queued`, for attempt `attemptToken` only (`refund`: the request never
   * left; `parkMs`: park the project), on disk. Resolves to the park deadline (0: none), or why
   * not. Idempotent.
   */
  async requeue(
    ref: DispatchRef,
    attempt: number,
    attemptToken: string,
    refund: boolean,
    parkMs = 0,
    retry?: WriteRetry,
  ): Promise<number | Exclude<MarkResult, 'marked'>> {
    return retryWrite(retry, async () => {
      const state = this.#state;
      const { dispatch, budget, park, tracked } = state.keys;
      const connection = await beforeWrite(state.options.durability, state.redis, tracked);
      const reply = (await state.scripts.run(
        'requeue',
        [dispatch(ref.dispatchId), budget(ref.projectId), park(ref.projectId), tracked],
        [
          ref.dispatchId,
          attempt,
          refund ? '1' : '0',
          Math.max(0, Math.round(parkMs)),
          attemptToken,
        ],
      )) as number;
      if (reply === -1) return 'moved-on';
      if (reply === -2) return 'stale';
      // On disk before the job moves on: a crash that took it back would leave the dispatch
      // `sending` under this token, and the job's next run would end it `ambiguous`, unsent.
      await afterWrite(state.options.durability, connection);
      return reply;
    });
  }

  /** Ends a dispatch with its one event, if it is in `expected` state (omitted: any but `done`). */
  async finish(
    record: DispatchRecord,
    ending: Ending,
    expected?: DispatchState,
  ): Promise<Finished> {
    const state = this.#state;
    const { keys, options } = state;
    const finishedAt = Date.now();
    const job = ending.job ?? record.job;
    const connection = await beforeWrite(options.durability, state.redis, keys.tracked);
    const reply = (await state.scripts.run(
      'finish',
      [
        keys.dispatch(record.dispatchId),
        ...laneOf(state, record),
        keys.tracked,
        options.eventsStream,
        keys.open,
        keys.budget(record.projectId),
        keys.prompt(record.dispatchId),
      ],
      [
        record.dispatchId,
        expected ?? '',
        finishedAt,
        ending.type,
        ending.reason ?? '',
        options.retentionMs,
        options.eventsMaxLen,
        ending.job ? JSON.stringify(ending.job) : '',
        job?.status ?? '',
        record.jobId,
        ...eventFields(record, ending, finishedAt),
      ],
    )) as [number, string, string, string?];
    const finished = reply[0] === 1;
    const found = (reply[3] || undefined) as DispatchState | undefined;
    const nextDispatchId = reply[1] || undefined;
    // The lane's release must be on disk before its next follow-up is woken. When it is not, the
    // next one is not woken now: it looks at the lane by itself later, and its own ACQUIRE's wait
    // covers this FINISH too (the AOF is one file, fsynced in order).
    if (
      nextDispatchId !== undefined &&
      (await notOnDisk(options.durability, connection)) !== undefined
    )
      return { finished, nextDispatchId: undefined, found };
    return { finished, nextDispatchId, found };
  }

  /**
   * Publishes the undeliverable event of a job without a record (an unreadable payload, a lost
   * record), once per job; not while the record exists, nor (`jobKey`) once the job is gone.
   */
  async publishOrphan(orphan: Orphan, payload: unknown, reason: string): Promise<OrphanResult> {
    const state = this.#state;
    const { keys, options } = state;
    const marker = keys.orphan(orphan.bullJobId);
    const reply = await state.scripts.run(
      'publishOrphan',
      [
        marker,
        options.eventsStream,
        keys.dispatch(orphan.dispatchId),
        orphan.jobKey ?? marker,
        keys.prompt(orphan.dispatchId),
      ],
      [
        options.retentionMs,
        options.eventsMaxLen,
        orphan.jobKey === undefined ? 0 : 1,
        ...orphanEventFields(orphan.bullJobId, payload, reason, Date.now()),
      ],
    );
    const results = { 1: 'published', 0: 'published-before', [-1]: 'record-exists' } as const;
    return results[reply as 1 | 0 | -1] ?? 'job-gone';
  }

  /** Sets the next status read of a tracked dispatch `delayMs` ahead; stores `fields` on it. */
  async reschedule(
    dispatchId: string,
    delayMs: number,
    fields: Record<string, string | number> = {},
  ): Promise<boolean> {
    const state = this.#state;
    const reply = await state.scripts.run(
      'reschedule',
      [state.keys.dispatch(dispatchId), state.keys.tracked],
      [
        dispatchId,
        Math.max(1, Math.round(delayMs)),
        state.clock.inMs(delayMs) ?? 0,
        ...Object.entries(fields).flat(),
      ],
    );
    return reply === 1;
  }

  /** Stops tracking a dispatch (its record expired, or was never ours). */
  async untrack(dispatchId: string): Promise<void> {
    const state = this.#state;
    await state.redis.zrem(state.keys.tracked, dispatchId);
  }

  /**
   * Records that `bullJobId` now carries a queued dispatch, if its record still names `expected`
   * (see carry-1.lua; '' = whichever). Resolves to whether it was recorded.
   */
  async carry(dispatchId: string, expected: string, bullJobId: string): Promise<boolean> {
    const state = this.#state;
    const reply = await state.scripts.run(
      'carry',
      [state.keys.dispatch(dispatchId)],
      [dispatchId, expected, bullJobId],
    );
    return reply === 1;
  }
}
