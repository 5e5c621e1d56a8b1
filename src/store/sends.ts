import type { Rate } from '../config/index.js';
import { NotDurableError } from '../redis/disk-wait.js';
import { acquireMany, MAX_ACQUIRES, type Acquire, type Acquired } from './acquire.js';
import { CallBatch } from './call-batch.js';
import type { Tracking } from './tracking.js';
import { parseRecord, type DispatchRecord, type DispatchState } from '../dispatch/record.js';
import {
  laneOf,
  readRecords,
  type DispatchRef,
  type StoreState,
  type Verdict,
} from './store-state.js';

/**
 * The store's records and lanes, and the step before a send: acquire (lane, park, budget, pause,
 * then the intent). What becomes of the send is `tracking.ts`; how a follow-up is registered,
 * `register.ts`. Reached as `DispatchStore.sends`.
 */

/** The records, lanes and the acquire of one store: `DispatchStore.sends`. */
export class Sends {
  readonly #state: StoreState;
  /** Where a send that Redis did not confirm on disk is queued again. */
  readonly #tracking: Tracking;

  /** ACQUIREs asked for in the same turn of the event loop share one script call. */
  readonly #acquires: CallBatch<Acquire, Acquired>;

  constructor(state: StoreState, tracking: Tracking) {
    this.#state = state;
    this.#tracking = tracking;
    this.#acquires = new CallBatch((items) => acquireMany(state, items), MAX_ACQUIRES);
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
    return parseRecord(dispatchId, prompt === null ? hash : { ...hash, prompt });
  }

  /** Reads several records in one round trip, all but their prompts; missing: `undefined`. */
  async getMany(ids: readonly string[]): Promise<(DispatchRecord | undefined)[]> {
    return readRecords(this.#state, ids);
  }

  /**
   * Checks lane, pauses, park and budget (the project's own limit replaces `rate`); when all allow
   * it, records the intent to send and tracks the dispatch (first read in `firstPollMs`). See
   * acquire-n.lua for `toleranceMs`, and why a retry with the same `attemptToken` spends nothing.
   * ACQUIREs asked for in the same turn of the event loop share one script call (`acquire.ts`).
   */
  async acquire(
    ref: DispatchRef,
    rate: Rate,
    toleranceMs: number,
    firstPollMs: number,
    attemptToken: string,
  ): Promise<Verdict> {
    const { reply, notDurable } = await this.#acquires.add({
      ref,
      rate,
      toleranceMs,
      firstPollMs,
      attemptToken,
    });
    const [kind, n, text, probe, now, writeBy] = reply;
    switch (kind) {
      case 'go': {
        const writeWithinMs =
          now !== undefined && writeBy !== undefined ? writeBy - now : undefined;
        if (notDurable === undefined)
          return { kind, attempt: n, prompt: text, probe: probe === 1, writeWithinMs };
        // Its intent is not on disk (see `acquireMany`): it must not be sent now.
        // Its own wait may fail too: the next run of the job then finds the intent in doubt.
        await this.#tracking.requeue(ref, n, attemptToken, true, 0).catch((err: unknown) => {
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
      case 'expired':
        return { kind, expiresAtMs: n };
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
