import type { ChainableCommander } from 'ioredis';
import type { AgentJob } from '../agent-api/index.js';
import type { Rate } from '../config/index.js';
import { contentDigest, type FollowUp } from './followup.js';
import { NotDurableError } from '../redis/durability.js';
import { onDisk, wroteOn } from './on-disk.js';
import {
  FIELDS_BUT_PROMPT,
  parseRecord,
  type DispatchRecord,
  type DispatchState,
} from './record.js';
import { laneOf, type DispatchRef, type StoreState } from './store-state.js';

/**
 * The store's records and lanes, and the steps of a send: register, acquire (lane, park, budget,
 * pause), record its outcome, or queue it again. Reached through {@link DispatchStore}.
 */

/** The answer of `DispatchStore.acquire`. */
export type Verdict =
  /** Send now. `probe`: sends are paused and this one tries whether the key works again. */
  | { kind: 'go'; attempt: number; prompt: string; probe: boolean }
  | { kind: 'blocked' }
  /** Its prompt cannot be sent (empty, or over `promptMaxBytes`): nothing was spent. */
  | { kind: 'invalid'; promptBytes: number }
  /** The key was rejected: every send waits; the next probe may go at `untilMs`. */
  | { kind: 'auth_paused'; untilMs: number }
  /** An operator paused the project: nothing was spent; it waits for the resume. */
  | { kind: 'paused' }
  | { kind: 'parked' | 'over'; untilMs: number }
  | { kind: 'missing' }
  /**
   * Another attempt (`attemptToken`) recorded its intent at `sendingAt` and has not recorded an
   * outcome.
   */
  | { kind: 'sending'; sendingAt: number; attemptToken: string }
  /**
   * It could go, but Redis did not confirm the intent on disk (`REDIS_DURABILITY`): it is queued
   * again, its budget unit back, and must not be sent now. `reason` is the WAITAOF failure.
   */
  | { kind: 'not_durable'; reason: string }
  | { kind: 'not-queued'; state: DispatchState };

/**
 * What recording an attempt's outcome did: `marked` (or it already was), `moved-on` (the record is
 * in another state), `stale` (another attempt holds the intent now).
 */
export type MarkResult = 'marked' | 'moved-on' | 'stale';

/** A follow-up to register, with the trace context of the producer's span when traced. */
export type Registration = FollowUp & { readonly traceparent?: string | undefined };

export function registerInto(
  state: StoreState,
  multi: ChainableCommander,
  dispatchId: string,
  followUp: Registration,
): void {
  state.scripts.queue(
    multi,
    'register',
    [state.keys.dispatch(dispatchId), laneOf(state, followUp), state.keys.open],
    [
      dispatchId,
      followUp.projectId,
      followUp.jobId,
      followUp.prompt,
      followUp.key ?? '',
      followUp.meta ? JSON.stringify(followUp.meta) : '',
      contentDigest(followUp),
      followUp.traceparent ?? '',
    ],
  );
}

export async function get(
  state: StoreState,
  dispatchId: string,
): Promise<DispatchRecord | undefined> {
  return parseRecord(dispatchId, await state.redis.hgetall(state.keys.dispatch(dispatchId)));
}

export async function getMany(
  state: StoreState,
  ids: readonly string[],
): Promise<(DispatchRecord | undefined)[]> {
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

export async function acquire(
  state: StoreState,
  ref: DispatchRef,
  rate: Rate,
  toleranceMs: number,
  firstPollMs: number,
  attemptToken: string,
): Promise<Verdict> {
  const { keys } = state;
  const connection = wroteOn(state);
  const reply = (await state.scripts.run(
    'acquire',
    [
      keys.dispatch(ref.dispatchId),
      laneOf(state, ref),
      keys.budget(ref.projectId),
      keys.park(ref.projectId),
      keys.tracked,
      keys.authPause,
      keys.projectControls(ref.projectId),
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
    ],
  )) as [string, number, string, number?, number?];
  const [kind, n, text, probe, redisNowMs] = reply;
  if (redisNowMs !== undefined) state.clock.saw(redisNowMs);
  switch (kind) {
    case 'go': {
      // The intent must be on disk before the prompt leaves: a crash that took it back would
      // make the follow-up `queued` again, and it would be sent twice.
      const notDurable = await onDisk(state, connection);
      if (notDurable === undefined) return { kind, attempt: n, prompt: text, probe: probe === 1 };
      await requeue(state, ref, n, attemptToken, true, 0);
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

export async function markSent(
  state: StoreState,
  ref: DispatchRef,
  newState: 'sent' | 'unsettled',
  job: AgentJob | undefined,
  firstDelayMs: number,
  attemptToken: string,
): Promise<MarkResult> {
  const connection = wroteOn(state);
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
  const notDurable = result === 'marked' ? await onDisk(state, connection) : undefined;
  if (notDurable !== undefined) throw new NotDurableError(notDurable);
  return result;
}

export async function requeue(
  state: StoreState,
  ref: DispatchRef,
  attempt: number,
  attemptToken: string,
  refund: boolean,
  parkMs = 0,
): Promise<number | Exclude<MarkResult, 'marked'>> {
  const { keys } = state;
  const reply = (await state.scripts.run(
    'requeue',
    [
      keys.dispatch(ref.dispatchId),
      keys.budget(ref.projectId),
      keys.park(ref.projectId),
      keys.tracked,
    ],
    [ref.dispatchId, attempt, refund ? '1' : '0', Math.max(0, Math.round(parkMs)), attemptToken],
  )) as number;
  if (reply === -1) return 'moved-on';
  return reply === -2 ? 'stale' : reply;
}

export async function isNext(state: StoreState, ref: DispatchRef): Promise<boolean> {
  const reply = await state.scripts.run(
    'isNext',
    [state.keys.dispatch(ref.dispatchId), laneOf(state, ref)],
    [ref.dispatchId],
  );
  return reply === 1;
}
