/**
 * The Redis keys of the organization's budget (`ORG_RATE_LIMIT`), one pair per shard under the
 * shard's prefix, so ACQUIRE reaches them with the project's keys (one Redis Cluster slot).
 */

/** A shard's org budget keys. */
export interface OrgKeys {
  /** Sorted set: the shard's send log of its share, with reservations `r:<id>` (includes/org.lua). */
  readonly budget: string;
  /** Hash: project → the dispatch id holding its one reservation in {@link OrgKeys.budget}. */
  readonly holders: string;
}

/** The org budget keys of the shard whose prefix is `prefix`. */
export function orgKeys(prefix: string): OrgKeys {
  return { budget: `${prefix}:org:budget`, holders: `${prefix}:org:holders` };
}
