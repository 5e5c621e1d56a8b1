import { Job, type Queue } from 'bullmq';
import { endingTypeOf, EVENT_TYPES, type EventType } from '../dispatch/event.js';
import type { DispatchState } from '../dispatch/record.js';
import type { DispatchStore } from './store.js';
import type { Metrics } from '../telemetry/metrics.js';
import { finishAndHandOn } from './finish.js';

/**
 * An operator's cancel of one follow-up not sent yet: FINISH from `queued` with a
 * `followup.cancelled` event, and the same hand-on of its lane as any other end. ACQUIRE leaves
 * `queued` atomically too, so when the two race exactly one wins: a cancelled follow-up is never
 * sent, and one that is being sent is never cancelled.
 */

/** What a cancel did: `cancelled`, `refused` (the follow-up is in `state`), or `unknown`. */
export type CancelOutcome =
  | {
      readonly outcome: 'cancelled';
      readonly nextDispatchId: string | undefined;
      /** `followup.cancelled`, or `job.cancelled` for a creation. */
      readonly type: EventType;
    }
  | { readonly outcome: 'refused'; readonly state: DispatchState }
  | { readonly outcome: 'unknown' };

/** What a cancel needs: the store, the dispatch queue (to wake the lane's next), metrics if any. */
export interface CancelContext {
  readonly store: DispatchStore;
  readonly queue: Queue;
  readonly metrics?: Metrics | undefined;
}

/** Cancels `dispatchId` if it is still `queued`; see {@link CancelOutcome}. */
export async function cancelDispatch(
  ctx: CancelContext,
  dispatchId: string,
): Promise<CancelOutcome> {
  const record = await ctx.store.sends.get(dispatchId);
  if (!record) return { outcome: 'unknown' };
  if (record.state !== 'queued') return { outcome: 'refused', state: record.state };
  // Queued again to resend an unsettled send (AMBIGUOUS_RESEND): its first send may have reached
  // the agent, so a cancel could not promise that nothing was sent. It counts as unsettled.
  if (record.resendPending) return { outcome: 'refused', state: 'unsettled' };
  // On disk before it answers (REDIS_DURABILITY): a crash that undid a confirmed cancel would
  // let the worker send the prompt after all.
  const ended = await ctx.store.onDisk(() =>
    finishAndHandOn(ctx, record, { type: EVENT_TYPES.cancelled }, 'queued'),
  );
  if (!ended.finished)
    return ended.found ? { outcome: 'refused', state: ended.found } : { outcome: 'unknown' };
  await dropJob(ctx.queue, record.bullJobId ?? dispatchId);
  const type = endingTypeOf(record, EVENT_TYPES.cancelled);
  return { outcome: 'cancelled', nextDispatchId: ended.nextDispatchId, type };
}

/**
 * Removes the cancelled follow-up's BullMQ job when it is only waiting (parked for its budget, or
 * not taken yet), so it does not linger until its wake-up. A job a worker holds right now is left
 * to it: its ACQUIRE finds the record `done` and drops it without sending.
 */
async function dropJob(queue: Queue, bullJobId: string): Promise<void> {
  const job = await Job.fromId(queue, bullJobId);
  if (!job) return;
  const state = await job.getState();
  if (state === 'delayed' || state === 'waiting' || state === 'prioritized')
    await job.remove().catch(() => {
      // A worker took it in between: its ACQUIRE drops it.
    });
}
