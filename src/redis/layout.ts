import type { Redis } from 'ioredis';
import { layoutKey } from './keys.js';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * What a deployment's Redis must agree with before anything writes: whether it is a cluster
 * (`REDIS_CLUSTER`), and the shard count its records were written with (`DISPATCH_SHARDS`).
 */

/** A deployment setting the Redis contradicts. Code `layout_mismatch`; `setting` names it. */
export class LayoutError extends AgentDispatchError {
  readonly code = 'layout_mismatch';
  constructor(
    readonly setting: 'REDIS_CLUSTER' | 'DISPATCH_SHARDS',
    message: string,
  ) {
    super(`${setting}: ${message}`);
    this.name = 'LayoutError';
  }
}

/** Whether the server behind `redis` runs in cluster mode (`INFO cluster`: `cluster_enabled:1`). */
export async function isClusterNode(redis: Redis): Promise<boolean> {
  const info = await redis.info('cluster');
  return /^cluster_enabled:1\s*$/m.test(info);
}

/** Throws {@link LayoutError} when `REDIS_CLUSTER` says otherwise than the server. */
export function checkClusterMode(expected: boolean, actual: boolean): void {
  if (expected === actual) return;
  throw new LayoutError(
    'REDIS_CLUSTER',
    expected
      ? 'is true, but REDIS_URL is a single Redis (cluster_enabled:0): unset REDIS_CLUSTER, or point REDIS_URL at a node of the cluster'
      : 'is not set, but REDIS_URL is a node of a Redis Cluster (cluster_enabled:1): set REDIS_CLUSTER=true',
  );
}

/** The shard count recorded for `prefix`, or `undefined` when none was. */
export async function recordedShardCount(
  redis: Redis,
  prefix: string,
): Promise<number | undefined> {
  const value = await redis.get(layoutKey(prefix));
  return value === null ? undefined : Number(value);
}

/** Records `count` as the shard count of `prefix`. */
export async function recordShardCount(redis: Redis, prefix: string, count: number): Promise<void> {
  await redis.set(layoutKey(prefix), String(count));
}

/** The refusal of a start whose `DISPATCH_SHARDS` differs from the records it would strand. */
export function shardCountMismatch(
  configured: number,
  recorded: number,
  open: number,
): LayoutError {
  return new LayoutError(
    'DISPATCH_SHARDS',
    `is ${configured}, but this Redis holds ${open} unfinished follow-ups written with DISPATCH_SHARDS=${recorded}. ` +
      `Change it only after a drain: stop the producers, let the fleet (still DISPATCH_SHARDS=${recorded}) end every follow-up, ` +
      `then restart everything with the new count (docs/operations.md, "Changing DISPATCH_SHARDS")`,
  );
}

/**
 * The shard count a tool (the producer, `createAdmin`, `status`, `cancel`, `project ...`) works
 * with, read once: the count the fleet recorded when its roles started (`layoutKey`), so a tool
 * whose `DISPATCH_SHARDS` is unset (`configured` undefined) still reaches every shard. A
 * `configured` count that differs from the record is refused with {@link LayoutError}, as is a
 * record that is not a count: acting on the wrong shard would answer `paused` while the project
 * goes on sending. Without a record (no role ever started): `configured`, else `unset` (the
 * setting's default). A single Redis must not be a cluster node either (a cluster connection to
 * a single Redis never gets ready, so that case shows as Redis unavailable). `recorded` says
 * whether the count is the fleet's record.
 */
export async function fleetShardCount(
  redis: Redis,
  expected: { cluster: boolean; prefix: string; configured: number | undefined; unset: number },
): Promise<{ count: number; recorded: boolean }> {
  if (!expected.cluster) checkClusterMode(false, await isClusterNode(redis));
  const key = layoutKey(expected.prefix);
  const stored = await redis.get(key);
  const { configured } = expected;
  if (stored === null) return { count: configured ?? expected.unset, recorded: false };
  const recorded = Number(stored);
  if (!/^\d{1,3}$/.test(stored) || recorded < 1)
    throw new LayoutError(
      'DISPATCH_SHARDS',
      `the fleet's record of it (${key}) holds ${JSON.stringify(stored.slice(0, 40))}, not a shard count: ` +
        "start a worker with the fleet's DISPATCH_SHARDS to record it again",
    );
  if (configured !== undefined && configured !== recorded)
    throw new LayoutError(
      'DISPATCH_SHARDS',
      `is ${configured}, but the fleet on this Redis runs with ${recorded}: ` +
        `set it to ${recorded}, or unset it to use the fleet's count`,
    );
  return { count: recorded, recorded: true };
}
