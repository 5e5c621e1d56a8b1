import type { Redis } from 'ioredis';
import type { DispatchRef } from '../../src/store/store.js';
import type { Keys } from '../../src/redis/keys.js';

/**
 * Ways to break one follow-up's keys or stored values by hand, as an operator or a bug might: the
 * batched scripts must fail that follow-up alone and write nothing of it.
 */
export const POISONS = [
  'record-not-a-hash',
  'budget-not-a-zset',
  'budget-entry-infinite',
  'budget-entry-far-ahead',
  'limit-window-out-of-range',
  'limit-window-not-a-number',
  'limit-max-fractional',
  'park-not-a-number',
  'park-not-a-string',
  'prompt-not-a-string',
  'lane-not-a-list',
  'lane-heads-not-a-hash',
  'head-record-not-a-hash',
] as const;

export type Poison = (typeof POISONS)[number];

/** Breaks `ref`'s keys as `kind` says; `head` is the follow-up ahead of it in its lane. */
export async function poison(
  redis: Redis,
  at: Keys,
  kind: Poison,
  ref: DispatchRef,
  head: DispatchRef,
): Promise<void> {
  const { projectId } = ref;
  const limit = (fields: Record<string, string | number>) =>
    redis.hset(at.projectControls(projectId), { limit: 'x', max: 1, toleranceMs: 50, ...fields });
  const replace = async (key: string, write: () => Promise<unknown>) => {
    await redis.del(key);
    await write();
  };
  // The head is out of the way unless its record is the poison: the item heads its lane.
  if (kind !== 'head-record-not-a-hash')
    await redis.hset(at.dispatch(head.dispatchId), 'state', 'done');
  switch (kind) {
    case 'record-not-a-hash':
      return void (await replace(at.dispatch(ref.dispatchId), () =>
        redis.set(at.dispatch(ref.dispatchId), 'x'),
      ));
    case 'budget-not-a-zset':
      return void (await redis.set(at.budget(projectId), 'a budget log overwritten by hand'));
    case 'budget-entry-infinite':
      return void (await redis.zadd(at.budget(projectId), '+inf', 'forever'));
    case 'budget-entry-far-ahead':
      return void (await redis.zadd(at.budget(projectId), 1e300, 'far'));
    case 'limit-window-out-of-range':
      return void (await limit({ windowMs: 864_000_000_000_000_000 }));
    case 'limit-window-not-a-number':
      return void (await limit({ windowMs: 'one hour' }));
    case 'limit-max-fractional':
      return void (await limit({ windowMs: 60_000, max: 2.5 }));
    case 'park-not-a-number':
      return void (await redis.set(at.park(projectId), 'soon'));
    case 'park-not-a-string':
      return void (await redis.sadd(at.park(projectId), 'soon'));
    case 'prompt-not-a-string':
      return void (await replace(at.prompt(ref.dispatchId), () =>
        redis.rpush(at.prompt(ref.dispatchId), 'x'),
      ));
    case 'lane-not-a-list':
      return void (await replace(at.lane(projectId, ref.jobId), () =>
        redis.set(at.lane(projectId, ref.jobId), 'x'),
      ));
    case 'lane-heads-not-a-hash':
      return void (await replace(at.laneHeads(projectId), () =>
        redis.set(at.laneHeads(projectId), 'x'),
      ));
    case 'head-record-not-a-hash':
      return void (await replace(at.dispatch(head.dispatchId), () =>
        redis.set(at.dispatch(head.dispatchId), 'x'),
      ));
  }
}

/** Every key of `ref`'s follow-up and project (and `head`'s record), dumped: to show none changed. */
export async function itemState(
  redis: Redis,
  at: Keys,
  ref: DispatchRef,
  head: DispatchRef,
): Promise<Record<string, string | null>> {
  const keys = [
    at.dispatch(ref.dispatchId),
    at.dispatch(head.dispatchId),
    at.prompt(ref.dispatchId),
    at.budget(ref.projectId),
    at.park(ref.projectId),
    at.projectControls(ref.projectId),
    at.laneHeads(ref.projectId),
    at.lane(ref.projectId, ref.jobId),
  ];
  const state: Record<string, string | null> = {};
  for (const key of keys) {
    state[key] = (await redis.dumpBuffer(key))?.toString('hex') ?? null;
    // Whether it expires, not when: a TTL counts down between two reads.
    const ttl = await redis.pttl(key);
    state[`${key} ttl`] = ttl > 0 ? 'expires' : String(ttl);
    state[`tracked ${key}`] = await redis.zscore(at.tracked, ref.dispatchId);
  }
  return state;
}

/**
 * Rewrites a text of side a (a record's field, a lane entry) in side b's names: the first `half`
 * dispatch ids and projects 0-2 (`project(side, p)`) of each side, mapped pairwise, so that a
 * healthy item of a call with a poisoned item compares equal with its twin of a call without.
 */
export function sideAToB(
  sideA: readonly DispatchRef[],
  sideB: readonly DispatchRef[],
  half: number,
  project: (side: string, p: number) => string,
): (text: string) => string {
  const mapping = new Map<string, string>();
  for (let i = 0; i < half; i++) {
    const [a, b] = [sideA[i], sideB[i]];
    if (a && b) mapping.set(a.dispatchId, b.dispatchId);
  }
  for (let p = 0; p < 3; p++) mapping.set(project('a', p), project('b', p));
  return (text) =>
    text
      .split(/([:|])/)
      .map((part) => mapping.get(part) ?? part)
      .join('');
}
