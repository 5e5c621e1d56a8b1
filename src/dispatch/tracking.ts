import type { DispatchState, DispatchRecord } from './record.js';
import { eventFields, orphanEventFields, type Ending } from './event.js';
import { onDisk, wroteOn } from './on-disk.js';
import { laneOf, type StoreState } from './store-state.js';

/**
 * The store's tracked set (sent dispatches whose agent job the poller reads), the end of a
 * dispatch with its one event, the open index the repair sweep walks, and the status-read parks
 * of projects. Reached through {@link DispatchStore}.
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

/**
 * What FINISH did: whether this call ended the dispatch, the lane's next dispatch, and when it did
 * not, the state it found (`undefined`: no record).
 */
export interface Finished {
  readonly finished: boolean;
  readonly nextDispatchId: string | undefined;
  readonly found?: DispatchState | undefined;
}

/** Dispatches claimed for a read, by Redis's clock, and when the next tracked one falls due. */
export interface DueReads {
  readonly nowMs: number;
  readonly ids: string[];
  /** When the earliest dispatch still tracked falls due; `undefined`: none is tracked. */
  readonly nextDueMs: number | undefined;
}

export async function finish(
  state: StoreState,
  record: DispatchRecord,
  ending: Ending,
  expected: DispatchState | undefined,
): Promise<Finished> {
  const { keys, options } = state;
  const finishedAt = Date.now();
  const job = ending.job ?? record.job;
  const connection = wroteOn(state);
  const reply = (await state.scripts.run(
    'finish',
    [
      keys.dispatch(record.dispatchId),
      laneOf(state, record),
      keys.tracked,
      options.eventsStream,
      keys.open,
      keys.budget(record.projectId),
    ],
    [
      record.dispatchId,
      expected ?? '',
      finishedAt,
      ending.type,
      ending.reason ?? '',
      options.retentionMs,
      options.eventsMaxLen,
      ending.job ? JSON.stringify(ending.job) : '',
      job?.status ?? '',
      ...eventFields(record, ending, finishedAt),
    ],
  )) as [number, string, string, string?];
  const finished = reply[0] === 1;
  const found = (reply[3] || undefined) as DispatchState | undefined;
  const nextDispatchId = reply[1] || undefined;
  // The lane's release must be on disk before its next follow-up is woken. When it is not, the
  // next one is not woken now: it looks at the lane by itself later, and its own ACQUIRE's wait
  // covers this FINISH too (the AOF is one file, fsynced in order).
  if (nextDispatchId !== undefined && (await onDisk(state, connection)) !== undefined)
    return { finished, nextDispatchId: undefined, found };
  return { finished, nextDispatchId, found };
}

/** The job an orphan event is for; with `jobKey`, only while that BullMQ job hash exists. */
export interface Orphan {
  readonly bullJobId: string;
  readonly dispatchId: string;
  readonly jobKey?: string;
}

/** What publishing an orphan event did: see publishOrphan-4.lua. */
export type OrphanResult = 'published' | 'published-before' | 'record-exists' | 'job-gone';

export async function publishOrphan(
  state: StoreState,
  orphan: Orphan,
  payload: unknown,
  reason: string,
): Promise<OrphanResult> {
  const { keys, options } = state;
  const marker = keys.orphan(orphan.bullJobId);
  const reply = await state.scripts.run(
    'publishOrphan',
    [marker, options.eventsStream, keys.dispatch(orphan.dispatchId), orphan.jobKey ?? marker],
    [
      options.retentionMs,
      options.eventsMaxLen,
      orphan.jobKey === undefined ? 0 : 1,
      ...orphanEventFields(orphan.bullJobId, payload, reason, Date.now()),
    ],
  );
  const results = { 1: 'published', 0: 'published-before', [-1]: 'record-exists' } as const;
  return results[reply as 1 | 0 | -1] ?? 'job-gone';
}

export async function reschedule(
  state: StoreState,
  dispatchId: string,
  delayMs: number,
  fields: Record<string, string | number>,
): Promise<boolean> {
  const reply = await state.scripts.run(
    'reschedule',
    [state.keys.dispatch(dispatchId), state.keys.tracked],
    [
      dispatchId,
      Math.max(1, Math.round(delayMs)),
      state.clock.inMs(delayMs) ?? 0,
      ...Object.entries(fields).flat(),
    ],
  );
  return reply === 1;
}

export async function due(state: StoreState, limit: number, leaseMs: number): Promise<DueReads> {
  const reply = await state.scripts.run('due', [state.keys.tracked], [limit, Math.round(leaseMs)]);
  const [now, nextAt, ...ids] = reply as [number, number, ...string[]];
  state.clock.saw(now);
  return { nowMs: now, ids, nextDueMs: nextAt < 0 ? undefined : nextAt };
}

export async function untrack(state: StoreState, dispatchId: string): Promise<void> {
  await state.redis.zrem(state.keys.tracked, dispatchId);
}

export async function carry(
  state: StoreState,
  dispatchId: string,
  expected: string,
  bullJobId: string,
): Promise<boolean> {
  const reply = await state.scripts.run(
    'carry',
    [state.keys.dispatch(dispatchId)],
    [dispatchId, expected, bullJobId],
  );
  return reply === 1;
}

export async function openPage(
  state: StoreState,
  rank: number,
  count: number,
  enqueuedBy: number,
): Promise<{ dispatches: OpenDispatch[]; more: boolean }> {
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

export async function dropOpen(state: StoreState, ids: readonly string[]): Promise<void> {
  if (ids.length > 0) await state.redis.zrem(state.keys.open, ...ids);
}

export async function pollParks(
  state: StoreState,
  projectIds: readonly string[],
): Promise<Map<string, number>> {
  if (projectIds.length === 0) return new Map();
  const values = await state.redis.mget(...projectIds.map((p) => state.keys.pollPark(p)));
  return new Map(projectIds.map((p, i) => [p, Number(values[i] ?? 0)]));
}

export async function parkPolls(
  state: StoreState,
  projectId: string,
  delayMs: number,
): Promise<void> {
  await state.redis.set(state.keys.pollPark(projectId), Date.now() + delayMs, 'PX', delayMs);
}

/** How many dispatches are not finished yet (the open index's size). */
export function openCount(state: StoreState): Promise<number> {
  return state.redis.zcard(state.keys.open);
}
