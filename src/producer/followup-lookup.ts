import type { DeadLetter, DispatchStore, FollowupDetail } from '../store/store.js';
import { newDispatchId } from '../store/register.js';
import { EVENT_TYPES } from '../dispatch/event.js';

/**
 * The admin's look-ups of single follow-ups across shards (a dispatch id does not name its shard):
 * one follow-up's detail, the dead letters, and the search of the follow-ups page. Each reads a
 * bounded number of keys per shard, whatever the backlog.
 */

interface LookupShard {
  readonly store: DispatchStore;
}

/** The detail of `dispatchId` from whichever shard holds it, or null. */
export async function followUpOf(
  shards: readonly LookupShard[],
  dispatchId: string,
): Promise<FollowupDetail | null> {
  const each = await Promise.all(shards.map((s) => s.store.followups.detail(dispatchId)));
  return each.find((d) => d !== undefined) ?? null;
}

/** The dead letters of every shard that match `filter`, newest first. */
export async function deadLettersOf(
  shards: readonly LookupShard[],
  filter: DeadLetterFilter,
): Promise<DeadLetter[]> {
  const each = await Promise.all(shards.map((s) => matchingDeadLetters(s.store, filter)));
  return each
    .flat()
    .sort((a, b) => b.finishedAt - a.finishedAt)
    .slice(0, filter.limit ?? 100);
}

/**
 * The follow-ups `text` names: itself as a dispatch id, the dispatch of it as an idempotency key,
 * and as an agent job id its open follow-ups (in every project with one open) and its dead letters
 * among the newest 500 of each shard.
 */
export async function searchFollowUps(
  shards: readonly LookupShard[],
  text: string,
): Promise<string[]> {
  const query = text.trim();
  if (query === '' || query.length > 200) return [];
  const keyed = newDispatchId(query);
  const each = await Promise.all(
    shards.map(async ({ store }) => {
      const [asId, asKey, counts, dead] = await Promise.all([
        store.followups.has(query),
        store.followups.has(keyed),
        store.followups.openCounts(),
        store.followups.deadLetters(500),
      ]);
      const ofJob = await store.followups.ofJob([...counts.keys()], query);
      return [
        ...(asId ? [query] : []),
        ...(asKey ? [keyed] : []),
        ...ofJob,
        ...dead.items.filter((d) => d.jobId === query).map((d) => d.dispatchId),
      ];
    }),
  );
  return [...new Set(each.flat())];
}

/** What to redrive when no ids are given: the dead letters that match, newest first. */
export interface DeadLetterFilter {
  readonly projectId?: string | undefined;
  /** The event's `reason` (`not_found`, `http_400`...), or `timed_out` for the timed-out ones. */
  readonly reason?: string | undefined;
  /** @defaultValue 100 */
  readonly limit?: number | undefined;
  /** Include the ones already redriven. @defaultValue false */
  readonly redriven?: boolean | undefined;
}

/** The dead letters of `store` that match `filter`, newest first, reading the index 500 at a time. */
export async function matchingDeadLetters(
  store: DispatchStore,
  filter: DeadLetterFilter,
): Promise<DeadLetter[]> {
  const limit = filter.limit ?? 100;
  const out: DeadLetter[] = [];
  for (let offset = 0; out.length < limit; offset += 500) {
    const { items, total } = await store.followups.deadLetters(500, offset);
    for (const d of items) {
      const reason = d.type === EVENT_TYPES.timedOut ? 'timed_out' : d.reason;
      if (filter.projectId !== undefined && d.projectId !== filter.projectId) continue;
      if (filter.reason !== undefined && reason !== filter.reason) continue;
      if (!filter.redriven && d.redrivenTo) continue;
      if (out.length < limit) out.push(d);
    }
    if (offset + 500 >= total) break;
  }
  return out;
}
