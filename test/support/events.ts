import type { Redis } from 'ioredis';
import type { EventView } from '../../src/store/store.js';
import { eventually } from './namespace.js';

/** One completion event as read back from the stream, with `event` parsed. */
export interface StreamEvent extends Omit<EventView, 'reason'> {
  readonly prLink: string;
  /** Present only when the follow-up was traced. */
  readonly traceparent: string | undefined;
  readonly v: string;
  readonly event: Record<string, unknown>;
}

/** Reads the whole stream (XRANGE), parsing each entry. */
export async function readEvents(redis: Redis, stream: string): Promise<StreamEvent[]> {
  const entries = await redis.xrange(stream, '-', '+');
  return entries.map(([id, fields]) => {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
    return {
      id,
      type: f['type'] ?? '',
      dispatchId: f['dispatchId'] ?? '',
      projectId: f['projectId'] ?? '',
      jobId: f['jobId'] ?? '',
      status: f['status'] ?? '',
      prLink: f['prLink'] ?? '',
      traceparent: f['traceparent'],
      v: f['v'] ?? '',
      event: JSON.parse(f['event'] ?? 'null') as Record<string, unknown>,
    };
  });
}

/** Counts how many times each value occurs; the ones seen more than once. */
export function duplicates<T>(values: readonly T[]): T[] {
  const seen = new Map<T, number>();
  for (const v of values) seen.set(v, (seen.get(v) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([v]) => v);
}

/** Waits until the stream holds at least `count` events, then returns them all. */
export async function waitForEvents(
  redis: Redis,
  stream: string,
  count: number,
  timeoutMs = 90_000,
): Promise<StreamEvent[]> {
  return eventually(
    async () => {
      const all = await readEvents(redis, stream);
      return all.length >= count ? all : undefined;
    },
    { timeoutMs, intervalMs: 250, what: `${count} events` },
  );
}

/**
 * What `status` (library, CLI, HTTP) shows of a follow-up whose run completed, given its event:
 * the final state, the event's type and reason, and the last agent job with its PR link.
 */
export function completedStatus(event: StreamEvent | undefined): Record<string, unknown> {
  return {
    state: 'done',
    type: 'followup.completed',
    reason: null,
    status: 'completed',
    prLink: event?.prLink,
    job: { status: 'completed', prLink: event?.prLink },
  };
}

/** The fields of a `followup.completed` event that {@link addCompletedEvent} publishes. */
export interface CompletedEvent {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  /** The event's `event` field, as the JSON it is stored as. */
  readonly event: string;
}

/** Publishes a `followup.completed` event (no PR link) on `stream`, as a poller writes one. */
export async function addCompletedEvent(
  redis: Redis,
  stream: string,
  { dispatchId, projectId, jobId, event }: CompletedEvent,
): Promise<void> {
  await redis.xadd(
    stream,
    '*',
    'type',
    'followup.completed',
    'dispatchId',
    dispatchId,
    'projectId',
    projectId,
    'jobId',
    jobId,
    'status',
    'completed',
    'prLink',
    '',
    'event',
    event,
    'v',
    '1',
  );
}
