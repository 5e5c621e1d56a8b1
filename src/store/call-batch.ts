import { AgentDispatchError } from '../agent-dispatch-error.js';
import { sleep } from '../time/deadline.js';

/**
 * Calls asked for in one turn of the event loop, made as one: each `add` waits until the end of
 * the current turn (`setImmediate`), or until `maxBatch` are waiting, and then every waiting item
 * goes to `run` together, in the order added, each answered with its own result. A worker's sends
 * and a poller's reads end in bursts (many answers arrive in the same turn), so under load one
 * script call carries many ACQUIREs, MARK_SENTs, RESCHEDULEs or FINISHes: one command to write and
 * one reply to read instead of one each, for Redis and for the process. Alone, an item waits for
 * the end of the current turn only: not for `process.nextTick`, which runs before the turn's other
 * answers are read, so its batches would be smaller.
 *
 * A failed `run` fails every item it carried, as each would have failed alone; an item that `run`
 * answers with an {@link ItemFailure} (a wait for the disk that only some items needed) fails
 * alone. The next items go on.
 */

/** What `run` answers for an item that failed on its own: the item rejects with `err`. */
export class ItemFailure {
  constructor(readonly err: unknown) {}
}

/** `work`'s value, or its failure as an {@link ItemFailure} to answer the items it concerns. */
export function failureOf<T>(work: Promise<T>): Promise<T | ItemFailure> {
  return work.catch((err: unknown) => new ItemFailure(err));
}

/** What `run` answers per item: its result, or why that item failed. */
type Answer<Result> = Result | ItemFailure;

export class CallBatch<Item, Result> {
  readonly #run: (items: readonly Item[]) => Promise<readonly Answer<Result>[]>;
  readonly #maxBatch: number;
  #waiting: { item: Item; resolve: (r: Result) => void; reject: (err: unknown) => void }[] = [];
  #flushScheduled = false;

  /** `run` answers one result per item, in order. */
  constructor(
    run: (items: readonly Item[]) => Promise<readonly Answer<Result>[]>,
    maxBatch: number,
  ) {
    this.#run = run;
    this.#maxBatch = maxBatch;
  }

  add(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.#waiting.push({ item, resolve, reject });
      if (this.#waiting.length >= this.#maxBatch) this.#flush();
      else if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(() => {
          this.#flushScheduled = false;
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    const batch = this.#waiting;
    if (batch.length === 0) return;
    this.#waiting = [];
    let running: Promise<readonly Answer<Result>[]>;
    try {
      running = this.#run(batch.map((w) => w.item));
    } catch (err) {
      running = Promise.reject(err);
    }
    running.then(
      (results) => {
        for (const [i, w] of batch.entries()) {
          const result = results[i];
          if (i >= results.length)
            w.reject(new Error(`a batched call answered ${results.length} of ${batch.length}`));
          else if (result instanceof ItemFailure) w.reject(result.err);
          else w.resolve(result as Result);
        }
      },
      (err: unknown) => {
        for (const w of batch) w.reject(err);
      },
    );
  }
}

/**
 * A store operation as its callers call it, with its own arguments, batched per turn: the
 * returned function adds its arguments to a {@link CallBatch} whose `run` is `run(state, ...)`,
 * the one function of the operation's file (`acquireMany`, `markMany`, `finishMany`). With
 * `retryArg`, the argument at that index is a {@link WriteRetry} for the item (see `retryWrite`).
 */
export function batched<State, Args extends unknown[], Result>(
  state: State,
  run: (state: State, items: readonly Args[]) => Promise<readonly Answer<Result>[]>,
  maxBatch: number,
  retryArg?: number,
): (...args: Args) => Promise<Result> {
  const batch = new CallBatch<Args, Result>((items) => run(state, items), maxBatch);
  return (...args) =>
    retryWrite(
      retryArg === undefined ? undefined : (args[retryArg] as WriteRetry | undefined),
      () => batch.add(args),
    );
}

/**
 * How long a write that records what became of a send (MARK_SENT, REQUEUE) is tried again while
 * Redis fails it, and who hears of each failure. Both are safe to run twice: with the attempt's
 * token, a second run finds its own state.
 */
export interface WriteRetry {
  readonly budgetMs: number;
  readonly onError: (err: unknown, retryInMs: number) => void;
}

/** The longest wait between two tries of a write. */
const MAX_BACKOFF_MS = 2_000;

/**
 * Runs `write` until it succeeds or `retry`'s budget has passed, after any error, backing off from
 * 100 ms to 2 s; rejects with the last error. Without `retry`, runs it once.
 */
export async function retryWrite<T>(
  retry: WriteRetry | undefined,
  write: () => Promise<T>,
): Promise<T> {
  if (!retry) return write();
  const deadline = Date.now() + retry.budgetMs;
  for (let waitMs = 100; ; waitMs = Math.min(2 * waitMs, MAX_BACKOFF_MS)) {
    try {
      return await write();
    } catch (err) {
      if (Date.now() + waitMs > deadline) throw err;
      retry.onError(err, waitMs);
      await sleep(waitMs);
    }
  }
}

/** The four writes that go many to a script call. */
export type BatchedOp = 'acquire' | 'mark_sent' | 'reschedule' | 'finish';

/**
 * One item of a batched script call failed on its own and wrote nothing (see
 * includes/per-call.lua): a key of the wrong type, or a value stored in Redis that is out of
 * range (a limit, a park, a budget log entry written by hand). It fails again until an operator
 * repairs `key`; the other items of its call were not touched. Code `store_item`.
 */
export class StoreItemError extends AgentDispatchError {
  override readonly name = 'StoreItemError';
  readonly code = 'store_item';
  constructor(
    readonly op: BatchedOp,
    /** The key at fault, `-` when Redis's own error named none. */
    readonly key: string,
    /** What is wrong with it. */
    readonly why: string,
  ) {
    super(`${op}: ${key === '-' ? 'an item failed' : `key ${key}`}: ${why}`);
  }
}

const ITEM_REPLY = /^ITEM (\S+) ([\s\S]*)$/;

/**
 * `reply` of one item as `run` answers it: an error reply (`ITEM <key> <why>`) becomes an
 * {@link ItemFailure} with a {@link StoreItemError}; anything else is the item's result.
 */
export function itemAnswer<T>(op: BatchedOp, reply: T | Error): T | ItemFailure {
  if (!(reply instanceof Error)) return reply;
  const [, key = '-', why = reply.message] = ITEM_REPLY.exec(reply.message) ?? [];
  return new ItemFailure(new StoreItemError(op, key, why));
}
