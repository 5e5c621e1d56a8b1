import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

describe("the poller's claim of due reads (due)", () => {
  const fixture = useStore('tracking');

  it('claims every due dispatch of a batch over 1,000 with its lease, and leaves the rest', async () => {
    const { ns, store } = fixture();
    const tracked = keysFor(ns.prefix).tracked;
    const dueIds = Array.from({ length: 1_500 }, (_, i) => `due-${i}`);
    await ns.redis.zadd(tracked, ...dueIds.flatMap((id, i) => [i + 1, id]));
    await ns.redis.zadd(tracked, Date.now() + 3_600_000, 'later');

    const { nowMs, ids, nextDueMs } = await store.due(1_200, 60_000);

    expect(ids).toEqual(dueIds.slice(0, 1_200));
    const scores = await ns.redis.zrange(tracked, 0, -1, 'WITHSCORES');
    const scoreOf = new Map<string, number>();
    for (let i = 0; i < scores.length; i += 2) scoreOf.set(scores[i]!, Number(scores[i + 1]));
    expect(dueIds.slice(0, 1_200).every((id) => scoreOf.get(id) === nowMs + 60_000)).toBe(true);
    expect(dueIds.slice(1_200).map((id) => scoreOf.get(id))).toEqual(
      Array.from({ length: 300 }, (_, i) => 1_201 + i),
    );
    expect(scoreOf.size).toBe(1_501);
    expect(nextDueMs).toBe(1_201);
  });
});
