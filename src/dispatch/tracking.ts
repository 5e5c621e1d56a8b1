import { beforeWrite, notOnDisk } from '../redis/disk-wait.js';
import type { DispatchState, DispatchRecord } from './record.js';
import { eventFields, orphanEventFields, type Ending } from './event.js';
import { laneOf, type StoreState } from './store-state.js';

/**
 * The store's tracked set (sent dispatches whose agent job the poller reads) and the end of a
 * dispatch with its one event. Reached as `DispatchStore.tracking`.
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

/** Dispatches claimed for a read, by Redis's clock, and when the next tracked one falls due. */
export interface DueReads {
  readonly nowMs: number;
  readonly ids: string[];
  /** When the earliest dispatch still tracked falls due; `undefined`: none is tracked. */
  readonly nextDueMs: number | undefined;
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

  /** Claims at most `limit` tracked dispatches due for a read, for `leaseMs` (see DueReads). */
  async due(limit: number, leaseMs: number): Promise<DueReads> {
    const state = this.#state;
    const reply = await state.scripts.run(
      'due',
      [state.keys.tracked],
      [limit, Math.round(leaseMs)],
    );
    const [now, nextAt, ...ids] = reply as [number, number, ...string[]];
    state.clock.saw(now);
    return { nowMs: now, ids, nextDueMs: nextAt < 0 ? undefined : nextAt };
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
