import type { ChainableCommander } from 'ioredis';
import type { AgentJob } from '../agent-api/index.js';
import type { Rate } from '../config/index.js';
import { afterWrite, beforeWrite, notOnDisk, NotDurableError } from '../redis/disk-wait.js';
import { LUA } from './lua.js';
import { queueRegister, type Registration } from './register.js';
import {
  FIELDS_BUT_PROMPT,
  parseRecord,
  type DispatchRecord,
  type DispatchState,
} from './record.js';
import {
  laneOf,
  type DispatchRef,
  type MarkResult,
  type StoreState,
  type Verdict,
} from './store-state.js';

/**
 * The store's records and lanes, and the steps of a send: register, acquire (lane, park, budget,
 * pause), record its outcome, or queue it again. Reached as `DispatchStore.sends`.
 */

export type { Registration } from './register.js';

/** The records, lanes and send steps of one store: `DispatchStore.sends`. */
export class Sends {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /**
   * Queues SCRIPT LOAD of REGISTER at the start of `multi`, so that it is there when it runs
   * (NOSCRIPT inside MULTI fails one command and commits the rest). Returns the replies it adds.
   */
  loadScriptsInto(multi: ChainableCommander): number {
    multi.script('LOAD', LUA.register.source);
    return 1;
  }

  /** Queues REGISTER of a whole batch on `multi`; returns its calls (see {@link queueRegister}). */
  registerAllInto(
    multi: ChainableCommander,
    dispatchIds: readonly string[],
    followUps: readonly Registration[],
  ): number {
    return queueRegister(this.#state, multi, dispatchIds, followUps);
  }

  /** Reads one dispatch record, with its prompt (in one MULTI: FINISH deletes the prompt). */
  async get(dispatchId: string): Promise<DispatchRecord | undefined> {
    const { redis, keys } = this.#state;
    const read = redis.multi().hgetall(keys.dispatch(dispatchId)).get(keys.prompt(dispatchId));
    const [[hashErr, hash], [promptErr, prompt]] = ((await read.exec()) ?? [
      [new Error('Redis discarded the read of a dispatch record'), {}],
      [null, null],
    ]) as [[Error | null, Record<string, string>], [Error | null, string | null]];
    if (hashErr ?? promptErr) throw hashErr ?? promptErr;
    // A record written before prompts had their own key holds its prompt itself (as ACQUIRE reads).
    return parseRecord(
      dispatchId,
      prompt === null || 'prompt' in hash ? hash : { ...hash, prompt },
    );
  }

  /** Reads several records in one round trip, all but their prompts; missing: `undefined`. */
  async getMany(ids: readonly string[]): Promise<(DispatchRecord | undefined)[]> {
    const state = this.#state;
    if (ids.length === 0) return [];
    const pipeline = state.redis.pipeline();
    for (const id of ids) pipeline.hmget(state.keys.dispatch(id), ...FIELDS_BUT_PROMPT);
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((id, i) => {
      const [err, values] = replies[i] ?? [null, []];
      if (err) throw err;
      const hash: Record<string, string> = {};
      for (const [f, field] of FIELDS_BUT_PROMPT.entries()) {
        const value = (values as (string | null)[])[f];
        if (value !== null && value !== undefined) hash[field] = value;
      }
      return parseRecord(id, hash, false);
    });
  }

  /**
   * Checks lane, pauses, park and budget (the project's own limit replaces `rate`); when all allow
   * it, records the intent to send and tracks the dispatch (first read in `firstPollMs`). See
   * acquire-10.lua for `toleranceMs`, and why a retry with the same `attemptToken` spends nothing.
   */
  async acquire(
    ref: DispatchRef,
    rate: Rate,
    toleranceMs: number,
    firstPollMs: number,
    attemptToken: string,
  ): Promise<Verdict> {
    const state = this.#state;
    const { keys } = state;
    const connection = await beforeWrite(state.options.durability, state.redis, keys.tracked);
    const reply = (await state.scripts.run(
      'acquire',
      [
        keys.dispatch(ref.dispatchId),
        ...laneOf(state, ref),
        keys.budget(ref.projectId),
        keys.park(ref.projectId),
        keys.tracked,
        keys.authPause,
        keys.projectControls(ref.projectId),
        keys.prompt(ref.dispatchId),
        keys.open,
      ],
      [
        ref.dispatchId,
        rate.max,
        rate.windowMs,
        toleranceMs,
        Math.max(1, Math.round(firstPollMs)),
        attemptToken,
        keys.dispatch(''),
        state.options.promptMaxBytes ?? 0,
        ref.jobId,
      ],
    )) as [string, number, string, number?, number?];
    const [kind, n, text, probe, redisNowMs] = reply;
    if (redisNowMs !== undefined) state.clock.saw(redisNowMs);
    switch (kind) {
      case 'go': {
        // The intent must be on disk before the prompt leaves: a crash that took it back would
        // make the follow-up `queued` again, and it would be sent twice.
        const notDurable = await notOnDisk(state.options.durability, connection);
        if (notDurable === undefined) return { kind, attempt: n, prompt: text, probe: probe === 1 };
        // Its own wait may fail too: the next run of the job then finds the intent in doubt.
        await this.requeue(ref, n, attemptToken, true, 0).catch((err: unknown) => {
          if (!(err instanceof NotDurableError)) throw err;
        });
        return { kind: 'not_durable', reason: notDurable };
      }
      case 'blocked':
      case 'missing':
      case 'paused':
        return { kind };
      case 'invalid':
        return { kind, promptBytes: n };
      case 'auth_paused':
        return { kind, untilMs: n };
      case 'parked':
      case 'over':
        return { kind, untilMs: n };
      case 'sending':
        return { kind, sendingAt: n, attemptToken: text };
      default:
        return { kind: 'not-queued', state: kind as DispatchState };
    }
  }

  /** Records attempt `attemptToken`'s send as `sent`/`unsettled`, tracked, on disk. Idempotent. */
  async markSent(
    ref: DispatchRef,
    newState: 'sent' | 'unsettled',
    job: AgentJob | undefined,
    firstDelayMs: number,
    attemptToken: string,
  ): Promise<MarkResult> {
    const state = this.#state;
    const connection = await beforeWrite(state.options.durability, state.redis, state.keys.tracked);
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
  ): Promise<number | Exclude<MarkResult, 'marked'>> {
    const state = this.#state;
    const { dispatch, budget, park, tracked } = state.keys;
    const connection = await beforeWrite(state.options.durability, state.redis, tracked);
    const reply = (await state.scripts.run(
      'requeue',
      [dispatch(ref.dispatchId), budget(ref.projectId), park(ref.projectId), tracked],
      [ref.dispatchId, attempt, refund ? '1' : '0', Math.max(0, Math.round(parkMs)), attemptToken],
    )) as number;
    if (reply === -1) return 'moved-on';
    if (reply === -2) return 'stale';
    // On disk before the job moves on: a crash that took it back would leave the dispatch
    // `sending` under this token, and the job's next run would end it `ambiguous`, unsent.
    await afterWrite(state.options.durability, connection);
    return reply;
  }

  /** Whether a dispatch is queued at the head of its lane, so it may be sent now. */
  async isNext(ref: DispatchRef): Promise<boolean> {
    const state = this.#state;
    const reply = await state.scripts.run(
      'isNext',
      [state.keys.dispatch(ref.dispatchId), ...laneOf(state, ref)],
      [ref.dispatchId, ref.jobId],
    );
    return reply === 1;
  }
}
