import { isCreation } from '../dispatch/creation.js';
import { afterWrite, beforeWrite } from '../redis/disk-wait.js';
import { orgKeys } from '../redis/org-keys.js';
import { orphanEventFields } from '../dispatch/event.js';
import { CallBatch, retryWrite, type WriteRetry } from './call-batch.js';
import { MAX_RESCHEDULES, rescheduleMany, type Reschedule } from './reschedule.js';
import type { DispatchRef, MarkResult, StoreState } from './store-state.js';

/**
 * The store's tracked set (sent dispatches whose agent job the poller reads) besides a send's
 * answer (`mark-sent.ts`) and the end (`finish.ts`): a refused send goes back to the queue
 * (`requeue`, see requeue-5.lua; for one attempt only, its token, so running it twice finds its
 * own state), reschedules, untrack, carry, orphan events. Reached as `DispatchStore.tracking`.
 */

/**
 * The job an orphan event is for; with `jobKey`, only while that BullMQ job hash exists. Its
 * project and agent job, when known, say whose open count goes down and which lane heads it
 * leaves (see publishOrphan-10.lua).
 */
export interface Orphan {
  readonly bullJobId: string;
  readonly dispatchId: string;
  readonly jobKey?: string;
  readonly projectId?: string;
  readonly jobId?: string;
}

/** What publishing an orphan event did: see publishOrphan-10.lua. */
export type OrphanResult = 'published' | 'published-before' | 'record-exists' | 'job-gone';

/**
 * Whether `id` has the form of a dispatch id (`newDispatchId` in register.ts): 22 letters and
 * digits, the first a letter, or `k-` and 40 hex digits for a keyed one.
 */
export function isDispatchId(id: string): boolean {
  return /^(?:[A-Za-z][A-Za-z0-9]{21}|k-[0-9a-f]{40})$/.test(id);
}

/** The tracked set and the ends of one store: `DispatchStore.tracking`. */
export class Tracking {
  readonly #state: StoreState;
  readonly #reschedules: CallBatch<Reschedule, boolean>;
  constructor(state: StoreState) {
    this.#state = state;
    this.#reschedules = new CallBatch((items) => rescheduleMany(state, items), MAX_RESCHEDULES);
  }

  /**
   * Returns a dispatch to `queued`, for attempt `attemptToken` only (`refund`: the request never
   * left, its budget unit goes back; `'unwritten'`: nor was it written, so the attempt does not
   * count either; `parkMs`: park the project), on disk. Resolves to the park deadline (0: none), or why
   * not. Idempotent.
   */
  async requeue(
    ref: DispatchRef,
    attempt: number,
    attemptToken: string,
    refund: boolean | 'unwritten',
    parkMs = 0,
    retry?: WriteRetry,
  ): Promise<number | Exclude<MarkResult, 'marked'>> {
    return retryWrite(retry, () =>
      requeueOnce(this.#state, ref, attempt, attemptToken, refund, parkMs),
    );
  }

  /**
   * Publishes the undeliverable event of a job without a record (an unreadable payload, a lost
   * record), once per job; not while the record exists, nor (`jobKey`) once the job is gone. The
   * follow-up leaves the open dispatches with it, and its project's open count goes down. When it
   * headed a lane of two or more, `wake` is called with the next follow-up it let go on.
   */
  async publishOrphan(
    orphan: Orphan,
    payload: unknown,
    reason: string,
    wake?: (next: string) => Promise<void>,
  ): Promise<OrphanResult> {
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
        keys.open,
        keys.tracked,
        keys.dispatchQueue(orphan.dispatchId),
        keys.laneHeads(orphan.projectId ?? ''),
        keys.lane(orphan.projectId ?? '', orphan.jobId ?? ''),
      ],
      [
        options.retentionMs,
        options.eventsMaxLen,
        orphan.jobKey === undefined ? 0 : 1,
        orphan.dispatchId,
        orphan.projectId ?? '',
        orphan.projectId ? (orphan.jobId ?? '') : '',
        ...orphanEventFields(orphan.bullJobId, payload, reason, Date.now()),
      ],
    );
    if (typeof reply === 'string') {
      await wake?.(reply);
      return 'published';
    }
    const results = { 1: 'published', 0: 'published-before', [-1]: 'record-exists' } as const;
    return results[reply as 1 | 0 | -1] ?? 'job-gone';
  }

  /** Takes `dispatchId` out of the tracked set, with nothing else: for an id no producer made. */
  async untrack(dispatchId: string): Promise<void> {
    await this.#state.redis.zrem(this.#state.keys.tracked, dispatchId);
  }

  /**
   * Marks the ids among `dispatchIds` that have no record as orphans (see
   * markUnregistered-n.lua): their BullMQ jobs, added by a MULTI whose REGISTER failed, end
   * without an event. Resolves to those ids, whose jobs the caller removes.
   */
  async markUnregistered(dispatchIds: readonly string[]): Promise<string[]> {
    const { keys, options, scripts } = this.#state;
    if (dispatchIds.length === 0) return [];
    const marked = (await scripts.run(
      'markUnregistered',
      dispatchIds.flatMap((id) => [keys.dispatch(id), keys.orphan(id)]),
      [options.retentionMs],
    )) as number[];
    return marked.map((i) => dispatchIds[i - 1] as string);
  }

  /**
   * Sets the next status read of a tracked dispatch `delayMs` ahead; stores `fields` on it.
   * Reschedules asked for in the same turn of the event loop share one script call
   * (`reschedule.ts`). Resolves to `false` when it is no longer tracked.
   */
  reschedule(
    dispatchId: string,
    delayMs: number,
    fields: Record<string, string | number> = {},
  ): Promise<boolean> {
    return this.#reschedules.add({ dispatchId, delayMs, fields });
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

/** One try of {@link Tracking.requeue}; also ACQUIRE's own for a `go` not confirmed on disk. */
export async function requeueOnce(
  state: StoreState,
  ref: DispatchRef,
  attempt: number,
  attemptToken: string,
  refund: boolean | 'unwritten',
  parkMs: number,
): Promise<number | Exclude<MarkResult, 'marked'>> {
  const { dispatch, budget, createBudget, park, tracked } = state.keys;
  const split = isCreation(ref) && state.options.createRate !== undefined;
  const connection = await beforeWrite(state.options.durability, state.redis, tracked);
  const reply = (await state.scripts.run(
    'requeue',
    [
      dispatch(ref.dispatchId),
      split ? createBudget(ref.projectId) : budget(ref.projectId),
      park(ref.projectId),
      tracked,
      orgKeys(state.keys.prefix).budget,
    ],
    [
      ref.dispatchId,
      attempt,
      refund === 'unwritten' ? '2' : refund ? '1' : '0',
      Math.max(0, Math.round(parkMs)),
      attemptToken,
      state.options.orgRate ? '1' : '0',
    ],
  )) as number;
  if (reply === -1) return 'moved-on';
  if (reply === -2) return 'stale';
  // On disk before the job moves on: a crash that took it back would leave the dispatch
  // `sending` under this token, and the job's next run would end it `ambiguous`, unsent.
  await afterWrite(state.options.durability, connection);
  return reply;
}
