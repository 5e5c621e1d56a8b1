import type { Rate } from '../config/index.js';
import type { DispatchState } from '../dispatch/record.js';
import { beforeWrite, NotDurableError, notOnDisk } from '../redis/disk-wait.js';
import { orgKeys } from '../redis/org-keys.js';
import { isCreation } from '../dispatch/creation.js';
import { failureOf, itemAnswer, ItemFailure } from './call-batch.js';
import { laneOf, type DispatchRef, type StoreState, type Verdict } from './store-state.js';
import { requeueOnce } from './tracking.js';

/**
 * Most ACQUIREs in one call of acquire-n.lua: its arguments stay a few thousand, and its one ZADD
 * of the tracked set (includes/per-call.lua) within what one Lua `unpack` takes.
 */
export const MAX_ACQUIRES = 100;

/**
 * One ACQUIRE, as `DispatchStore.acquire` is called: checks lane, pauses, park and budget (the
 * project's own limit replaces `rate`); when all allow it, records the intent to send and tracks
 * the dispatch (first read in `firstPollMs`). See acquire-n.lua for `toleranceMs`, and why a retry
 * with the same `attemptToken` spends nothing.
 */
export type Acquire = [
  ref: DispatchRef,
  rate: Rate,
  toleranceMs: number,
  firstPollMs: number,
  attemptToken: string,
];

/** What acquire-n.lua answered for one dispatch: {verdict, n, text, probe, now, writeBy, to}. */
export type AcquireReply = [string, number, string, number?, number?, number?, string?];

/**
 * Runs `items` (ACQUIREs asked for in the same turn of the event loop, see `batched`) in one call
 * of acquire-n.lua, each answered as if it ran alone (one whose keys or stored values are broken
 * fails alone, writing nothing: a `StoreItemError`); then, when any may go, one wait for the disk
 * covers every intent of the call. A wait that fails otherwise (a connection lost meanwhile) fails
 * the `go`s only.
 */
export async function acquireMany(
  state: StoreState,
  items: readonly Acquire[],
): Promise<(Verdict | ItemFailure)[]> {
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
  for (const [ref, sendRate, sendToleranceMs, firstPollMs, attemptToken] of items) {
    // With BUDGET_SCOPE=split a creation counts in its project's creation log, at its own rate.
    const split = isCreation(ref) ? options.createRate : undefined;
    const rate = split ?? sendRate;
    const toleranceMs = split ? split.toleranceMs : sendToleranceMs;
    keyList.push(
      keys.dispatch(ref.dispatchId),
      ...laneOf(state, ref),
      split ? keys.createBudget(ref.projectId) : keys.budget(ref.projectId),
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
  const notDurable = replies.some(isGo)
    ? await failureOf(notOnDisk(options.durability, connection))
    : undefined;
  return Promise.all(
    replies.map((reply, i) => {
      if (reply instanceof ItemFailure) return reply;
      if (!isGo(reply)) return verdictOf(reply);
      if (notDurable instanceof ItemFailure) return notDurable;
      return notDurable === undefined
        ? verdictOf(reply)
        : failureOf(requeueUnsent(state, items[i] as Acquire, reply[1], notDurable));
    }),
  );
}

/**
 * A `go` whose intent is not on disk must not be sent now: it is queued again, its budget unit
 * back. Its own wait may fail too: the next run of the job then finds the intent in doubt.
 */
async function requeueUnsent(
  state: StoreState,
  [ref, , , , attemptToken]: Acquire,
  attempt: number,
  reason: string,
): Promise<Verdict> {
  await requeueOnce(state, ref, attempt, attemptToken, true, 0).catch((err: unknown) => {
    if (!(err instanceof NotDurableError)) throw err;
  });
  return { kind: 'not_durable', reason };
}

/** The verdict of one reply of acquire-n.lua. */
function verdictOf([kind, n, text, probe, now, writeBy, to]: AcquireReply): Verdict {
  switch (kind) {
    case 'go': {
      const writeWithinMs = now !== undefined && writeBy !== undefined ? writeBy - now : undefined;
      return { kind, attempt: n, prompt: text, probe: probe === 1, writeWithinMs, to: to ?? '' };
    }
    case 'no_job':
    case 'creation_expired':
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
