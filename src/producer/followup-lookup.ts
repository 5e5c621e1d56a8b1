import type { DeadLetter, DispatchStore, FollowupDetail } from '../store/store.js';
import { newDispatchId } from '../store/register.js';
import { matchingDeadLetters, type DeadLetterFilter } from './redrive.js';

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
