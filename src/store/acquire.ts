import type { Rate } from '../config/index.js';
import { beforeWrite, notOnDisk } from '../redis/disk-wait.js';
import { orgKeys } from '../redis/org-keys.js';
import { failureOf, itemAnswer, ItemFailure } from './call-batch.js';
import { laneOf, type DispatchRef, type StoreState } from './store-state.js';

/**
 * Most ACQUIREs in one call of acquire-n.lua: its arguments stay a few thousand, and its one ZADD
 * of the tracked set (includes/per-call.lua) within what one Lua `unpack` takes.
 */
export const MAX_ACQUIRES = 100;

/** One ACQUIRE: see `Sends.acquire`. */
export interface Acquire {
  readonly ref: DispatchRef;
  readonly rate: Rate;
  readonly toleranceMs: number;
  readonly firstPollMs: number;
  readonly attemptToken: string;
}

/** What acquire-n.lua answered for one dispatch: {verdict, n, text, probe, now, writeBy}. */
export type AcquireReply = [string, number, string, number?, number?, number?];

/**
 * One ACQUIRE's answer, and for a `go`, why its intent is not confirmed on disk
 * (`REDIS_DURABILITY`): it must not be sent then. `undefined`: it is, or nothing is asked.
 */
export interface Acquired {
  readonly reply: AcquireReply;
  readonly notDurable?: string | undefined;
}

/**
 * Runs `items` in one call of acquire-n.lua (see `Sends.acquire`, which batches them), each
 * answered as if it ran alone (one whose keys or stored values are broken fails alone, writing
 * nothing: a `StoreItemError`); then, when any may go, one wait for the disk covers every intent
 * of the call. A wait that fails otherwise (a connection lost meanwhile) fails the `go`s only.
 */
export async function acquireMany(
  state: StoreState,
  items: readonly Acquire[],
): Promise<(Acquired | ItemFailure)[]> {
  const { keys, options } = state;
  const org = orgKeys(keys.prefix);
  const keyList = [keys.tracked, keys.authPause, org.budget, org.holders];
  const orgRate = options.orgRate;
  const args: (string | number)[] = [
    items.length,
    keys.dispatch(''),
    options.promptMaxBytes ?? 0,
    orgRate?.max ?? 0,
    orgRate?.windowMs ?? 0,
    orgRate?.toleranceMs ?? 0,
  ];
  for (const { ref, rate, toleranceMs, firstPollMs, attemptToken } of items) {
    keyList.push(
      keys.dispatch(ref.dispatchId),
      ...laneOf(state, ref),
      keys.budget(ref.projectId),
      keys.park(ref.projectId),
      keys.projectControls(ref.projectId),
      keys.prompt(ref.dispatchId),
    );
    args.push(
      ref.dispatchId,
      rate.max,
      rate.windowMs,
      toleranceMs,
      Math.max(1, Math.round(firstPollMs)),
      attemptToken,
      ref.jobId,
    );
  }
  const connection = await beforeWrite(options.durability, state.redis, keys.tracked);
  const replies = (
    (await state.scripts.run('acquire', keyList, args)) as (AcquireReply | Error)[]
  ).map((reply) => itemAnswer('acquire', reply));
  for (const reply of replies)
    if (!(reply instanceof ItemFailure) && reply[4] !== undefined) state.clock.saw(reply[4]);
  // The intents must be on disk before their prompts leave: a crash that took one back would
  // make its follow-up `queued` again, and it would be sent twice.
  const isGo = (reply: AcquireReply | ItemFailure): reply is AcquireReply =>
    !(reply instanceof ItemFailure) && reply[0] === 'go';
  const answer = (reply: AcquireReply | ItemFailure) =>
    reply instanceof ItemFailure ? reply : { reply };
  if (!replies.some(isGo)) return replies.map(answer);
  const notDurable = await failureOf(notOnDisk(options.durability, connection));
  return replies.map((reply) => {
    if (!isGo(reply)) return answer(reply);
    return notDurable instanceof ItemFailure ? notDurable : { reply, notDurable };
  });
}
