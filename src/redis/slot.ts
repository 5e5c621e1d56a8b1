import calculateSlot from 'cluster-key-slot';

/**
 * Redis Cluster's key slot, as ioredis computes it to route a command (the same package, at the
 * version ioredis pins), so the shard layout can give shard `i` of `N` a hash tag in the `i`-th
 * `N`th of the slot space: a cluster whose masters own equal contiguous slot ranges (what
 * `redis-cli --cluster create` and most managed clusters set up) then holds `N / masters` shards
 * on each master. WAITAOF's routing (disk-wait.ts) looks the master up by the same slot.
 */

/** Number of slots of a Redis Cluster. */
export const SLOTS = 16384;

/** The slot of `key`: of its hash tag (the first non-empty `{...}`), or of the whole key. */
export function keySlot(key: string): number {
  return calculateSlot(key);
}

/**
 * The hash tag of shard `index` of `count` under `base`: `<base>:<index>`, or `<base>:<index>.<k>`
 * with the smallest `k` that puts its slot in the shard's share of the slot space.
 */
export function shardTag(base: string, index: number, count: number): string {
  const from = Math.floor((index * SLOTS) / count);
  const to = Math.floor(((index + 1) * SLOTS) / count);
  for (let k = 0; ; k++) {
    const tag = k === 0 ? `${base}:${index}` : `${base}:${index}.${k}`;
    const slot = keySlot(`{${tag}}`);
    if (slot >= from && slot < to) return tag;
  }
}
