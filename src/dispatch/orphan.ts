import { EVENT_TYPES } from '../telemetry/names.js';
import { SCRIPTS } from './script.js';
import type { DispatchStore } from './store.js';

/**
 * Publishes an undeliverable event for a BullMQ job that has no dispatch record (a payload this
 * version cannot read), once per `bullJobId`. The event carries whatever ids the payload had.
 */
export async function publishOrphan(
  store: DispatchStore,
  bullJobId: string,
  payload: unknown,
  reason: string,
): Promise<boolean> {
  const data = (typeof payload === 'object' && payload !== null ? payload : {}) as Record<
    string,
    unknown
  >;
  const text = (name: string) => (typeof data[name] === 'string' ? (data[name] as string) : '');
  const event = {
    dispatchId: text('dispatchId') || bullJobId,
    projectId: text('projectId'),
    jobId: text('jobId'),
    key: null,
    meta: null,
    job: null,
    reason,
    enqueuedAt: null,
    sentAt: null,
    finishedAt: new Date().toISOString(),
    attempts: 0,
  };
  const fields = {
    type: EVENT_TYPES.undeliverable,
    dispatchId: event.dispatchId,
    projectId: event.projectId,
    jobId: event.jobId,
    status: '',
    prLink: '',
    event: JSON.stringify(event),
    v: '1',
  };
  const { retentionMs, eventsMaxLen, eventsStream } = store.options;
  const reply = await SCRIPTS.orphan.run(
    store.redis,
    [store.keys.orphan(bullJobId), eventsStream],
    [retentionMs, eventsMaxLen, ...Object.entries(fields).flat()],
  );
  return reply === 1;
}
