import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

describe('the tracked set: claims of due reads (DUE) and their reschedules', () => {
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

  it('moves a tracked read and stores what it saw, never taking back seen active', async () => {
    const { ns, producer, store } = fixture();
    const tracked = keysFor(ns.prefix).tracked;
    const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
    await ns.redis.hset(keysFor(ns.prefix).dispatch(dispatchId), 'seenActive', '1');
    await ns.redis.zadd(tracked, 5, dispatchId);

    const before = Date.now();
    expect(
      await store.reschedule(dispatchId, 60_000, { seenActive: '0', lastStatus: 'completed' }),
    ).toBe(true);
    expect(Number(await ns.redis.zscore(tracked, dispatchId))).toBeGreaterThanOrEqual(
      before + 59_000,
    );
    expect(await store.get(dispatchId)).toMatchObject({
      seenActive: true,
      lastStatus: 'completed',
    });
  });

  it('stores the read of a tracked dispatch whose score was already that time', async () => {
    const { ns, producer, store } = fixture();
    const tracked = keysFor(ns.prefix).tracked;
    const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
    await ns.redis.zadd(tracked, 1, dispatchId);
    // Two reschedules back to back, most often in the same millisecond: the second moves
    // nothing (same score), yet the dispatch is tracked and what it saw is stored.
    for (let i = 0; i < 20; i++) {
      const replies = await Promise.all([
        store.reschedule(dispatchId, 60_000, { polls: 1 }),
        store.reschedule(dispatchId, 60_000, { polls: 2 }),
      ]);
      expect(replies).toEqual([true, true]);
    }
    expect((await store.get(dispatchId))?.polls).toBe(2);
  });

  it('neither moves nor writes a dispatch that is no longer tracked', async () => {
    const { ns, producer, store } = fixture();
    const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
    expect(await store.reschedule(dispatchId, 1_000, { lastStatus: 'active' })).toBe(false);
    expect(await ns.redis.zscore(keysFor(ns.prefix).tracked, dispatchId)).toBeNull();
    expect((await store.get(dispatchId))?.lastStatus).toBeUndefined();
  });
});
