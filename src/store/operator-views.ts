import { readEventEntry } from '../dispatch/event.js';
import type { StoreState } from './store-state.js';

/**
 * Read-only views for the operator's page (`/dashboard/followups`): the tracked follow-ups with
 * their agent job's last status, and the last events. Reached through `DispatchStore.views`; they
 * never read a prompt.
 */

/** The operator's read-only views of one store. */
export class OperatorViews {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /** The first `count` tracked follow-ups, next read due first, and how many there are. */
  trackedPage(count: number): Promise<{ tracked: TrackedView[]; total: number }> {
    return trackedPage(this.#state, count);
  }

  /** The last `count` completion events, newest first. */
  lastEvents(count: number): Promise<EventView[]> {
    return lastEvents(this.#state, count);
  }
}

/** One tracked (sent or unsettled) follow-up, as the page lists it. Times are epoch ms. */
export interface TrackedView {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly state: string;
  readonly sentAt: number | undefined;
  /** The agent job's last status seen (empty before the first read). */
  readonly lastStatus: string;
  readonly polls: number;
  /** When its next status read is due. */
  readonly nextReadAt: number;
}

/** One completion event, as the page lists it. */
export interface EventView {
  readonly id: string;
  readonly type: string;
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly status: string;
  readonly reason: string | null;
  /** The agent job's pull request link ('' when none). */
  readonly prLink: string;
}

/** The first `count` tracked follow-ups, next read due first, and how many there are. */
async function trackedPage(
  state: StoreState,
  count: number,
): Promise<{ tracked: TrackedView[]; total: number }> {
  const { redis, keys } = state;
  const [flat, total] = await Promise.all([
    redis.zrange(keys.tracked, 0, count - 1, 'WITHSCORES'),
    redis.zcard(keys.tracked),
  ]);
  const page: [string, number][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) page.push([flat[i] as string, Number(flat[i + 1])]);
  const fields = ['projectId', 'jobId', 'state', 'sentAt', 'sendingAt', 'lastStatus', 'polls'];
  const pipeline = redis.pipeline();
  for (const [id] of page) pipeline.hmget(keys.dispatch(id), ...fields);
  const replies = page.length > 0 ? ((await pipeline.exec()) ?? []) : [];
  const tracked = page.map(([dispatchId, nextReadAt], i): TrackedView => {
    const [err, values] = replies[i] ?? [null, []];
    // A record that is not a hash (written by hand) is listed as such, not a failed page.
    const [projectId, jobId, recordState, sentAt, sendingAt, lastStatus, polls] = (
      err ? [] : (values ?? [])
    ) as (string | null)[];
    const sent = sentAt || sendingAt;
    return {
      dispatchId,
      projectId: projectId ?? '',
      jobId: jobId ?? '',
      state: err ? 'unreadable' : (recordState ?? 'gone'),
      sentAt: sent ? Number(sent) : undefined,
      lastStatus: lastStatus ?? '',
      polls: Number(polls ?? 0) || 0,
      nextReadAt,
    };
  });
  return { tracked, total };
}

/** The last `count` completion events, newest first. */
async function lastEvents(state: StoreState, count: number): Promise<EventView[]> {
  const entries = await state.redis.xrevrange(state.options.eventsStream, '+', '-', 'COUNT', count);
  return entries.map(([id, flat]) => {
    const { type, dispatchId, projectId, jobId, status, prLink, event } = readEventEntry(flat);
    // An entry not of ours is shown without a reason.
    const reason = (event as { reason?: unknown } | null | undefined)?.reason;
    return {
      id,
      type,
      dispatchId,
      projectId,
      jobId,
      status,
      reason: typeof reason === 'string' ? reason : null,
      prLink,
    };
  });
}
