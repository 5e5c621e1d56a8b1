import { parseRecord, type DispatchRecord } from '../dispatch/record.js';
import { readRecords } from './poll-state.js';
import { laneOf, type DispatchRef, type StoreState } from './store-state.js';

/**
 * The store's reads of records and lanes: a record with its prompt, several without, whether a
 * dispatch heads its lane. The step before a send is `acquire.ts`. Reached as
 * `DispatchStore.sends`.
 */

/** The records and lanes of one store: `DispatchStore.sends`. */
export class Sends {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
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
