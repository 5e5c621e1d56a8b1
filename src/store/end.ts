import type { Queue } from 'bullmq';
import { endingTypeOf, type Ending } from '../dispatch/event.js';
import type { DispatchRecord, DispatchState } from '../dispatch/record.js';
import type { Metrics } from '../telemetry/metrics.js';
import { inSettleSpan } from '../telemetry/tracing.js';
import { wakeDispatch } from './jobs.js';
import type { DispatchStore, Finished } from './store.js';

/** What ending a dispatch needs: the store, the dispatch queue (to wake the lane's next), metrics if any. */
export interface EndContext {
  readonly store: DispatchStore;
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
