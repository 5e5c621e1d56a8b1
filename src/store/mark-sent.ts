import type { AgentJob } from '../agent-api/index.js';
import { afterWrite, beforeWrite } from '../redis/disk-wait.js';
import { isCreation } from '../dispatch/creation.js';
import { firstRead } from '../dispatch/read-schedule.js';
import { settingDefault } from '../config/defaults.js';
import { failureOf, itemAnswer, ItemFailure, type WriteRetry } from './call-batch.js';
import type { DispatchRef, MarkResult, StoreState } from './store-state.js';

/**
 * Most answers in one call of markSent-n.lua: its arguments stay a few thousand, and its one ZADD
 * of the tracked set (includes/per-call.lua) within what one Lua `unpack` takes.
 */
export const MAX_MARKS = 100;

/**
 * One send's answer to record, as `DispatchStore.markSent` is called: attempt `attemptToken`'s
 * send as `sent`/`unsettled`, tracked, on disk. Its first read is `firstDelayMs` ahead, or one
 * growing step later when the answer shows the run active (`firstRead`). Idempotent, so retried
 * by `retry` when given.
 */
export type Mark = [
  ref: DispatchRef,
  newState: 'sent' | 'unsettled',
  job: AgentJob | undefined,
  firstDelayMs: number,
  attemptToken: string,
  retry?: WriteRetry,
];

/** `POLL_MAX_INTERVAL` for a store built without it. */
const DEFAULT_POLL_MAX_INTERVAL_MS = settingDefault('POLL_MAX_INTERVAL');

/** Where `retry` is in a {@link Mark}. */
export const MARK_RETRY_ARG = 5;

/**
 * Runs `items` (answers recorded in the same turn of the event loop, see `batched`) in one call of
 * markSent-n.lua, each answered as if it ran alone (a broken record fails alone, writing nothing);
 * then, when any was recorded, one wait for the disk covers them all.
 * The answers must be on disk before their BullMQ jobs complete: a crash that took one back while
 * the job's completion (resent by ioredis after the reconnect) survived would leave the dispatch
 * `sending` with no job left to settle it. When the wait fails, each recorded answer fails with
 * it (run again, MARK_SENT finds its own state); the others stand.
 */
export async function markMany(
  state: StoreState,
  items: readonly Mark[],
): Promise<(MarkResult | ItemFailure)[]> {
  const { keys, options, clock } = state;
  const args: (string | number)[] = [items.length];
  const pollMaxIntervalMs = options.pollMaxIntervalMs ?? DEFAULT_POLL_MAX_INTERVAL_MS;
  for (const [ref, newState, job, firstDelayMs, attemptToken] of items) {
    // A creation's new job has had no run before: any status it shows is its first run's.
    const created = isCreation(ref) && typeof job?.id === 'string' ? job.id : '';
    const answeredActive = job?.status === 'active';
    const first = firstRead(answeredActive, { pollMinIntervalMs: firstDelayMs, pollMaxIntervalMs });
    const atMs = Math.max(1, Math.round(first.atMs));
    args.push(
      ref.dispatchId,
      newState,
      job ? JSON.stringify(job) : '',
      job?.status ?? '',
      answeredActive || created !== '' ? '1' : '0',
      Math.max(1, Math.round(first.waitMs)),
      attemptToken,
      clock.inMs(atMs) ?? 0,
      created,
      atMs,
    );
  }
  const recordKeys = items.map(([ref]) => keys.dispatch(ref.dispatchId));
  const connection = await beforeWrite(options.durability, state.redis, keys.tracked);
  const replies = (await state.scripts.run('markSent', [keys.tracked, ...recordKeys], args)) as (
    number | Error
  )[];
  const results = replies.map((reply): MarkResult | ItemFailure => {
    const answer = itemAnswer('mark_sent', reply);
    if (answer instanceof ItemFailure) return answer;
    return answer === 1 ? 'marked' : answer === 0 ? 'moved-on' : 'stale';
  });
  if (!results.includes('marked')) return results;
  const onDisk = await failureOf(afterWrite(options.durability, connection));
  return results.map((result) =>
    result === 'marked' && onDisk instanceof ItemFailure ? onDisk : result,
  );
}
