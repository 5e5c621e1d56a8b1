import type { DispatchState } from './record.js';
import type { StoreState } from './store-state.js';

/**
 * The store's index of open dispatches (not finished yet, by enqueue time): the repair sweep
 * walks it page by page, and a change of shard count waits for it to be empty. Reached as
 * `DispatchStore.open`.
 */

/** What the repair sweep needs to know of one open dispatch; `state` undefined = no record. */
export interface OpenDispatch {
  readonly dispatchId: string;
  readonly enqueuedAt: number;
  readonly state: DispatchState | undefined;
  readonly projectId: string;
  readonly jobId: string;
  /** The BullMQ job that carries it: the dispatch id, unless a resend or a repair replaced it. */
  readonly bullJobId: string;
  readonly resendPending: boolean;
  /** How many times a repair replaced its BullMQ job. */
  readonly repairs: number;
  /** Its trace context, for the BullMQ job a repair adds. */
  readonly traceparent: string | undefined;
}

/** The open index of one store: `DispatchStore.open`. */
export class OpenIndex {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /**
   * Reads up to `count` open dispatches, oldest first from `rank`, enqueued by `enqueuedBy` (never
   * the prompt), and whether the index holds more past this page.
   */
  async page(
    rank: number,
    count: number,
    enqueuedBy: number,
  ): Promise<{ dispatches: OpenDispatch[]; more: boolean }> {
    const state = this.#state;
    const { redis, keys } = state;
    const flat = await redis.zrange(keys.open, rank, rank + count - 1, 'WITHSCORES');
    const page: { id: string; at: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const at = Number(flat[i + 1]);
      if (at > enqueuedBy) break;
      page.push({ id: flat[i] as string, at });
    }
    const more = page.length === count;
    if (page.length === 0) return { dispatches: [], more };
    const fields = [
      'state',
      'projectId',
      'jobId',
      'bullJobId',
      'resend',
      'repairs',
      'traceparent',
    ] as const;
    const pipeline = redis.pipeline();
    for (const { id } of page) pipeline.hmget(keys.dispatch(id), ...fields);
    const replies = (await pipeline.exec()) ?? [];
    const dispatches = page.map(({ id, at }, i): OpenDispatch => {
      const [err, values] = replies[i] ?? [new Error('no reply'), []];
      if (err) throw err;
      const [recordState, projectId, jobId, bullJobId, resend, repairs, traceparent] = values as (
        string | null
      )[];
      return {
        dispatchId: id,
        enqueuedAt: at,
        state: (recordState ?? undefined) as DispatchState | undefined,
        projectId: projectId ?? '',
        jobId: jobId ?? '',
        bullJobId: bullJobId || id,
        resendPending: resend === '1',
        repairs: Number(repairs ?? 0),
        traceparent: traceparent || undefined,
      };
    });
    return { dispatches, more };
  }

  /**
   * Removes dispatches from the open index (their record is gone or already done), and their
   * prompts: a record deleted by hand leaves its prompt's key behind.
   */
  async drop(ids: readonly string[]): Promise<void> {
    const { redis, keys } = this.#state;
    if (ids.length === 0) return;
    const replies = await redis
      .multi()
      .zrem(keys.open, ...ids)
      .del(...ids.map((id) => keys.prompt(id)))
      .exec();
    const failed = replies?.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }

  /** How many dispatches are not finished yet: a change of shard count waits for 0. */
  count(): Promise<number> {
    const state = this.#state;
    return state.redis.zcard(state.keys.open);
  }
}
