import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_RESCHEDULES } from '../../src/dispatch/reschedules.js';
import type { DispatchRef } from '../../src/dispatch/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

/**
 * The store's writes asked for in the same turn of the event loop (ACQUIRE, MARK_SENT,
 * RESCHEDULE, FINISH) go to Redis in one script call each, every one answered and written as if
 * it ran alone.
 */
describe('writes of the store asked for together', () => {
  const fixture = useStore('batched');
  afterEach(() => vi.restoreAllMocks());

  /** Counts the script calls the store's connection sends from now on. */
  const countScriptCalls = () => {
    const spy = vi.spyOn(fixture().ns.redis, 'sendCommand');
    return () =>
      spy.mock.calls.filter(([command]) => ['evalsha', 'eval'].includes(command.name)).length;
  };

  /** Follow-ups of project `p`, one per agent job named. */
  async function sent(...jobIds: string[]): Promise<DispatchRef[]> {
    const results = await fixture().producer.sendMany(
      jobIds.map((jobId, i) => ({ projectId: 'p', jobId, prompt: `prompt ${i}` })),
    );
    return results.map(({ dispatchId }, i) => ({ dispatchId, projectId: 'p', jobId: jobIds[i]! }));
  }

  it('ACQUIRE: one call; the budget, the lanes and the attempt tokens as if one after another', async () => {
    const { ns, store } = fixture();
    const [a, b, c, behind] = await sent('a', 'b', 'c', 'a');
    const rate = { max: 2, windowMs: 60_000 };
    const acquire = (ref: DispatchRef, token: string) =>
      store.sends.acquire(ref, rate, 50, 60_000, token);
    const scriptCalls = countScriptCalls();

    const verdicts = await Promise.all([
      acquire(a!, 'A'),
      acquire(behind!, 'D'),
      acquire(b!, 'B'),
      acquire(c!, 'C'),
      acquire(a!, 'A'),
    ]);

    expect(scriptCalls()).toBe(1);
    expect(verdicts.map((v) => v.kind)).toEqual(['go', 'blocked', 'go', 'over', 'go']);
    // The retry of A's ACQUIRE (same token) goes again with the same attempt, spending nothing.
    expect(verdicts[4]).toMatchObject({ kind: 'go', attempt: 1, prompt: 'prompt 0' });
    const budget = await ns.redis.zrange(keysFor(ns.prefix).budget('p'), 0, -1);
    expect(budget.sort()).toEqual(
      [`${a!.dispatchId}:1`, `${b!.dispatchId}:1`, `r:${c!.dispatchId}`].sort(),
    );
  });

  it('MARK_SENT: one call, each answered for its own attempt', async () => {
    const { store } = fixture();
    const [a, b] = await sent('a', 'b');
    const rate = { max: 10, windowMs: 60_000 };
    await store.sends.acquire(a!, rate, 50, 60_000, 'A');
    await store.sends.acquire(b!, rate, 50, 60_000, 'B');
    const job = { id: 'a', status: 'active' as const };
    const scriptCalls = countScriptCalls();

    const results = await Promise.all([
      store.tracking.markSent(a!, 'sent', job, 1_000, 'A'),
      store.tracking.markSent(b!, 'sent', undefined, 1_000, 'not B'),
      store.tracking.markSent(b!, 'unsettled', undefined, 1_000, 'B'),
    ]);

    expect(scriptCalls()).toBe(1);
    expect(results).toEqual(['marked', 'stale', 'marked']);
    expect(await store.sends.get(a!.dispatchId)).toMatchObject({
      state: 'sent',
      lastStatus: 'active',
      seenActive: true,
    });
    expect((await store.sends.get(b!.dispatchId))?.state).toBe('unsettled');
  });

  describe('RESCHEDULE', () => {
    it('one call, each answered and written as if alone', async () => {
      const { ns, producer, store } = fixture();
      const tracked = keysFor(ns.prefix).tracked;
      const results = await producer.sendMany(
        ['a', 'b', 'c'].map((jobId) => ({ projectId: 'p', jobId, prompt: 'hi' })),
      );
      const [a, b, gone] = results.map((r) => r.dispatchId) as [string, string, string];
      await ns.redis.zadd(tracked, 1, a, 1, b);
      const scriptCalls = countScriptCalls();

      const before = Date.now();
      const replies = await Promise.all([
        store.tracking.reschedule(a, 60_000, { lastStatus: 'active', polls: 1 }),
        store.tracking.reschedule(gone, 60_000, { lastStatus: 'active' }),
        store.tracking.reschedule(b, 120_000, { seenActive: '1' }),
        store.tracking.reschedule(a, 30_000, { seenActive: '0', polls: 2 }),
      ]);

      expect(replies).toEqual([true, false, true, true]);
      expect(scriptCalls()).toBe(1);
      // In the order asked: the second reschedule of `a` is the one that stands.
      expect(Number(await ns.redis.zscore(tracked, a))).toBeLessThan(before + 59_000);
      expect(Number(await ns.redis.zscore(tracked, b))).toBeGreaterThanOrEqual(before + 119_000);
      expect(await store.sends.get(a)).toMatchObject({
        lastStatus: 'active',
        polls: 2,
        seenActive: false,
      });
      expect(await store.sends.get(b)).toMatchObject({ seenActive: true });
      expect(await ns.redis.zscore(tracked, gone)).toBeNull();
      expect((await store.sends.get(gone))?.lastStatus).toBeUndefined();
    });

    it(`one call per ${MAX_RESCHEDULES}`, async () => {
      const { ns, producer, store } = fixture();
      const tracked = keysFor(ns.prefix).tracked;
      const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
      await ns.redis.zadd(tracked, 1, dispatchId);
      const scriptCalls = countScriptCalls();

      const count = 2 * MAX_RESCHEDULES + 50;
      const replies = await Promise.all(
        Array.from({ length: count }, (_, i) =>
          store.tracking.reschedule(dispatchId, 60_000, { polls: i + 1 }),
        ),
      );

      expect(replies.every((moved) => moved)).toBe(true);
      expect(scriptCalls()).toBe(3);
      expect((await store.sends.get(dispatchId))?.polls).toBe(count);
    });

    it('all fail when their call fails, and the next ones go on', async () => {
      const { ns, producer, store } = fixture();
      const tracked = keysFor(ns.prefix).tracked;
      const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi' });
      await ns.redis.set(tracked, 'not a sorted set');

      const replies = await Promise.allSettled([
        store.tracking.reschedule(dispatchId, 1_000, { polls: 1 }),
        store.tracking.reschedule(dispatchId, 1_000, { polls: 2 }),
      ]);

      expect(replies.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      expect(String((replies[0] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
      await ns.redis.del(tracked);
      await ns.redis.zadd(tracked, 1, dispatchId);
      expect(await store.tracking.reschedule(dispatchId, 1_000, { polls: 3 })).toBe(true);
      expect((await store.sends.get(dispatchId))?.polls).toBe(3);
    });
  });

  it('FINISH: one call, each answered and published as if alone', async () => {
    const { ns, store } = fixture();
    const [first, second, other, twice] = (await sent('j', 'j', 'k', 'l')).map(
      (r) => r.dispatchId,
    ) as [string, string, string, string];
    const record = async (id: string) => {
      const found = await store.sends.get(id);
      if (!found) throw new Error(`no record of ${id}`);
      return found;
    };
    const [a, c, d] = await Promise.all([record(first), record(other), record(twice)]);
    const scriptCalls = countScriptCalls();

    const answers = await Promise.all([
      store.tracking.finish(a, { type: 'followup.cancelled' }),
      store.tracking.finish(c, { type: 'followup.cancelled' }, 'sent'),
      store.tracking.finish(d, { type: 'followup.cancelled' }),
      store.tracking.finish(d, { type: 'followup.cancelled' }),
    ]);

    expect(scriptCalls()).toBe(1);
    expect(answers).toEqual([
      { finished: true, nextDispatchId: second },
      { finished: false, nextDispatchId: undefined, found: 'queued' },
      { finished: true, nextDispatchId: undefined },
      { finished: false, nextDispatchId: undefined, found: 'done' },
    ]);
    const entries = await ns.redis.xrange(ns.eventsStream, '-', '+');
    const published = entries.map(([, fields]) => fields[fields.indexOf('dispatchId') + 1]);
    expect(published).toEqual([first, twice]);
    expect(await store.sends.isNext({ dispatchId: second, projectId: 'p', jobId: 'j' })).toBe(true);
    expect((await record(other)).state).toBe('queued');
  });
});
