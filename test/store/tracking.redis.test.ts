import { afterEach, describe, expect, it, vi } from 'vitest';
import { DispatchStore } from '../../src/store/store.js';
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

    const { nowMs, ids, nextDueMs } = await store.poll.due(1_200, 60_000);

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
      await store.tracking.reschedule(dispatchId, 60_000, {
        seenActive: '0',
        lastStatus: 'completed',
      }),
    ).toBe(true);
    expect(Number(await ns.redis.zscore(tracked, dispatchId))).toBeGreaterThanOrEqual(
      before + 59_000,
    );
    expect(await store.sends.get(dispatchId)).toMatchObject({
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
        store.tracking.reschedule(dispatchId, 60_000, { polls: 1 }),
        store.tracking.reschedule(dispatchId, 60_000, { polls: 2 }),
      ]);
      expect(replies).toEqual([true, true]);
    }
    expect((await store.sends.get(dispatchId))?.polls).toBe(2);
  });

  it('neither moves nor writes a dispatch that is no longer tracked', async () => {
    const { ns, producer, store } = fixture();
    const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
    expect(await store.tracking.reschedule(dispatchId, 1_000, { lastStatus: 'active' })).toBe(
      false,
    );
    expect(await ns.redis.zscore(keysFor(ns.prefix).tracked, dispatchId)).toBeNull();
    expect((await store.sends.get(dispatchId))?.lastStatus).toBeUndefined();
  });

  describe("by Redis's clock, without a TIME of their own", () => {
    afterEach(() => vi.restoreAllMocks());
    const redisMs = async () => {
      const [seconds, micros] = await fixture().ns.redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };

    it("schedules MARK_SENT's and RESCHEDULE's reads on Redis's clock when this process's is an hour off", async () => {
      const { ns, producer, store } = fixture();
      const tracked = keysFor(ns.prefix).tracked;
      const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
      const ref = { dispatchId, projectId: 'p', jobId: 'j' };
      const realNow = Date.now.bind(Date);
      vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 3_600_000);

      expect((await store.acquire(ref, { max: 5, windowMs: 1_000 }, 20, 60_000, 'A')).kind).toBe(
        'go',
      );
      expect(await store.markSent(ref, 'sent', undefined, 30_000, 'A')).toBe('marked');
      let expected = (await redisMs()) + 30_000;
      expect(Math.abs(Number(await ns.redis.zscore(tracked, dispatchId)) - expected)).toBeLessThan(
        500,
      );

      await store.poll.due(10, 1_000); // nothing due: DUE's `now` keeps the clock
      expect(await store.tracking.reschedule(dispatchId, 45_000, {})).toBe(true);
      expected = (await redisMs()) + 45_000;
      expect(Math.abs(Number(await ns.redis.zscore(tracked, dispatchId)) - expected)).toBeLessThan(
        500,
      );
    });

    it("reads a run the send's answer shows active one growing step later, with that step as its last wait", async () => {
      const { ns, producer, store } = fixture();
      const keys = keysFor(ns.prefix);
      const sentWith = async (status: string) => {
        const { dispatchId } = await producer.send({ projectId: 'p', jobId: status, prompt: 'x' });
        const ref = { dispatchId, projectId: 'p', jobId: status };
        await store.acquire(ref, { max: 5, windowMs: 1_000 }, 20, 60_000, 'A');
        const job = { id: status, status, prLink: null };
        expect(await store.markSent(ref, 'sent', job, 10_000, 'A')).toBe('marked');
        const now = await redisMs();
        const at = Number(await ns.redis.zscore(keys.tracked, dispatchId)) - now;
        const [wait, seen, activeAt] = await ns.redis.hmget(
          keys.dispatch(dispatchId),
          'pollDelayMs',
          'seenActive',
          'activeAt',
        );
        return { at, wait, seen, activeAgo: activeAt === null ? null : now - Number(activeAt) };
      };
      // The answer is a read that saw the run active: when it came is kept, as a read's would be.
      const active = await sentWith('active');
      expect(Math.abs(active.at - 25_000)).toBeLessThan(500);
      expect(active).toMatchObject({ wait: '15000', seen: '1' });
      expect(Math.abs(active.activeAgo!)).toBeLessThan(500);
      // A terminal status at the send is the previous run's: read soon, to see this one active.
      const stale = await sentWith('completed');
      expect(Math.abs(stale.at - 10_000)).toBeLessThan(500);
      expect(stale).toMatchObject({ wait: '10000', seen: '0', activeAgo: null });
    });

    it('falls back to TIME in a store that has not seen Redis answer its time yet', async () => {
      const { ns, producer, store } = fixture();
      const keys = keysFor(ns.prefix);
      const tracked = keys.tracked;
      const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
      const ref = { dispatchId, projectId: 'p', jobId: 'j' };
      await store.acquire(ref, { max: 5, windowMs: 1_000 }, 20, 60_000, 'A');
      // Another process (a rerun after a crash) marks it: its store never ran ACQUIRE or DUE.
      const other = new DispatchStore(ns.redis, keys, {
        eventsStream: ns.eventsStream,
        eventsMaxLen: 1000,
        retentionMs: 60_000,
      });
      vi.spyOn(Date, 'now').mockImplementation(() => 0);
      expect(await other.markSent(ref, 'unsettled', undefined, 30_000, 'A')).toBe('marked');
      const expected = (await redisMs()) + 30_000;
      expect(Math.abs(Number(await ns.redis.zscore(tracked, dispatchId)) - expected)).toBeLessThan(
        500,
      );
    });
  });
});
