import type { Queue } from 'bullmq';
import { beforeWrite, notOnDisk } from '../redis/disk-wait.js';
import type { Metrics } from '../telemetry/metrics.js';
import { inSettleSpan } from '../telemetry/tracing.js';
import { failureOf, itemAnswer, ItemFailure } from './call-batch.js';
import { endingTypeOf, eventFields, type Ending } from '../dispatch/event.js';
import type { DispatchRecord, DispatchState } from '../dispatch/record.js';
import { wakeDispatch } from './jobs.js';
import { laneOf, type StoreState } from './store-state.js';

/**
 * How a follow-up ends, from the role's call to FINISH's reply: `endDispatch` (or
 * `finishAndHandOn`) settles it with its one event and wakes its lane's next; `finishMany` is the
 * batch of FINISH calls behind `DispatchStore.finish`.
 */

/**
 * Most ends in one call of finish-n.lua: its arguments stay a few thousand, and its one ZREM of
 * each shared key (includes/per-call.lua) within what one Lua `unpack` takes.
 */
export const MAX_FINISHES = 100;

/** `DEAD_LETTER_RETENTION`'s default: a week. */
export const DEAD_LETTER_RETENTION_MS = 7 * 86_400_000;

/**
 * One end, as `DispatchStore.finish` is called: `record` ends with its one event for `ending`, if
 * it is in `expected` state (omitted: any but `done`).
 */
export type Finish = [record: DispatchRecord, ending: Ending, expected?: DispatchState];

/**
 * What FINISH did: whether this call ended the dispatch, the lane's next dispatch, and when it did
 * not, the state it found (`undefined`: no record).
 */
export interface Finished {
  readonly finished: boolean;
  readonly nextDispatchId: string | undefined;
  readonly found?: DispatchState | undefined;
}

/**
 * Runs `items` (ends asked for in the same turn of the event loop, see `batched`) in one call of
 * finish-n.lua, each answered as if it ran alone (a broken key fails its item alone, writing
 * nothing); they end now, by this process's clock. The lanes' releases must be on disk before their next follow-ups
 * are woken: when the wait for the disk (`REDIS_DURABILITY`) fails, no next follow-up is
 * answered; each looks at its lane by itself later, and its own ACQUIRE's wait covers these ends
 * too (the AOF is one file, fsynced in order).
 */
export async function finishMany(
  state: StoreState,
  items: readonly Finish[],
): Promise<(Finished | ItemFailure)[]> {
  const { keys, options } = state;
  const keyList = [keys.tracked, options.eventsStream, keys.open];
  const args: (string | number)[] = [
    items.length,
    options.retentionMs,
    options.eventsMaxLen,
    options.deadLetterRetentionMs ?? DEAD_LETTER_RETENTION_MS,
  ];
  const finishedAt = Date.now();
  for (const [record, ending, expected] of items) {
    const job = ending.job ?? record.job;
    keyList.push(
      keys.dispatch(record.dispatchId),
      ...laneOf(state, record),
      keys.budget(record.projectId),
      keys.prompt(record.dispatchId),
      // A creation's reservation is in its project's creation log when split: cleared from both,
      // since a producer's store does not know BUDGET_SCOPE.
      keys.createBudget(record.projectId),
    );
    const entry = eventFields(record, ending, finishedAt);
    args.push(
      record.dispatchId,
      expected ?? '',
      finishedAt,
      endingTypeOf(record, ending.type),
      ending.reason ?? '',
      ending.job ? JSON.stringify(ending.job) : '',
      job?.status ?? '',
      record.jobId,
      entry.length,
      ...entry,
    );
  }
  const connection = await beforeWrite(options.durability, state.redis, keys.tracked);
  const reply = (await state.scripts.run('finish', keyList, args)) as (
    [number, string, string, string?] | Error
  )[];
  const answers = reply.map((item): Finished | ItemFailure => {
    const answer = itemAnswer('finish', item);
    if (answer instanceof ItemFailure) return answer;
    const [ended, next, , found] = answer;
    return {
      finished: ended === 1,
      nextDispatchId: next || undefined,
      found: (found || undefined) as DispatchState | undefined,
    };
  });
  const hasNext = (a: Finished | ItemFailure): a is Finished =>
    !(a instanceof ItemFailure) && a.nextDispatchId !== undefined;
  if (!answers.some(hasNext)) return answers;
  const notDurable = await failureOf(notOnDisk(options.durability, connection));
  return answers.map((a) => {
    if (!hasNext(a)) return a;
    if (notDurable instanceof ItemFailure) return notDurable;
    return notDurable === undefined ? a : { ...a, nextDispatchId: undefined };
  });
}

/** What ending a dispatch needs: the store, the dispatch queue (to wake the lane's next), metrics if any. */
export interface EndContext {
  /** `DispatchStore`, of which ending needs only `finish`. */
  readonly store: { readonly finish: (...finish: Finish) => Promise<Finished> };
  readonly queue: Queue;
  readonly metrics?: Metrics | undefined;
}

/**
 * Ends a dispatch the one way a role does: FINISH publishes its one event (only from `expected`
 * state; any state but `done` when omitted), the event is counted, and the lane's next dispatch
 * is woken. Resolves to whether this call ended it.
 */
export async function endDispatch(
  ctx: EndContext & { readonly metrics: Metrics },
  record: DispatchRecord,
  ending: Ending,
  expected?: DispatchState,
): Promise<boolean> {
  return (await finishAndHandOn(ctx, record, ending, expected)).finished;
}

/**
 * {@link endDispatch} for a caller that may have no metrics (an operator's cancel through the
 * library): resolves to all that FINISH answered, the state it found when it changed nothing.
 */
export async function finishAndHandOn(
  ctx: EndContext,
  record: DispatchRecord,
  ending: Ending,
  expected?: DispatchState,
): Promise<Finished> {
  // The event carries the trace context of this settle span (or the stored one, untraced here).
  const result = await inSettleSpan(record, ending.type, (traceparent) =>
    ctx.store.finish({ ...record, traceparent }, ending, expected),
  );
  if (result.finished)
    ctx.metrics?.eventsPublished.inc({ type: endingTypeOf(record, ending.type) });
  if (result.nextDispatchId) await wakeDispatch(ctx.queue, result.nextDispatchId);
  return result;
}
