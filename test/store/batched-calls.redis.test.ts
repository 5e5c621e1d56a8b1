import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_RESCHEDULES } from '../../src/store/reschedule.js';
import type { DispatchRef } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { monitorServer, type Monitor } from '../support/monitor.js';
import { useStore } from '../support/store.js';

/**
 * The store's writes asked for in the same turn of the event loop (ACQUIRE, MARK_SENT,
 * RESCHEDULE, FINISH) go to Redis in one script call each, every one answered and written as if
 * it ran alone.
 */
describe('writes of the store asked for together', () => {
  const fixture = useStore('batched');
  /** MONITOR connections of the current test, closed after it even when it fails. */
  const monitors: Monitor[] = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const monitor of monitors.splice(0)) await monitor.stop();
  });

  /** Counts the script calls the store's connection sends from now on. */
  const countScriptCalls = () => {
    const spy = vi.spyOn(fixture().ns.redis, 'sendCommand');
    return () =>
      spy.mock.calls.filter(([command]) => ['evalsha', 'eval'].includes(command.name)).length;
  };

  /**
   * Watches, through MONITOR, the commands our scripts run on the namespace's keys from now on;
   * `stop` answers them (name in lower case, then the arguments) once every command sent before
   * it has been seen.
   */
  async function watchScriptCommands() {
    const { ns } = fixture();
    const seen: string[][] = [];
    const monitor = await monitorServer(ns.redisUrl, ({ args, source }) => {
      if (source === 'lua' && args.some((arg) => arg.startsWith(ns.prefix))) {
        seen.push([args[0]!.toLowerCase(), ...args.slice(1)]);
      }
    });
    monitors.push(monitor);
    return {
      async stop(): Promise<string[][]> {
        await monitor.settle();
        return seen;
      },
    };
  }

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
      store.acquire(ref, rate, 50, 60_000, token);
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

  it('ACQUIRE: the send pause read once per call, the tracked set written once, no reservation looked up unless the record holds one', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const refs = await sent('a', 'b', 'c');
    const rate = { max: 10, windowMs: 60_000 };
    const watch = await watchScriptCommands();

    const verdicts = await Promise.all(
      refs.map((ref, i) => store.acquire(ref, rate, 50, 60_000, `T${i}`)),
    );

    const commands = await watch.stop();
    expect(verdicts.map((v) => v.kind)).toEqual(['go', 'go', 'go']);
    const named = (name: string, key: string) =>
      commands.filter(([command, first]) => command === name && first === key);
    expect(named('hmget', at.authPause)).toHaveLength(1);
    expect(named('hmget', at.projectControls('p'))).toHaveLength(1);
    expect(named('get', at.park('p'))).toHaveLength(1);
    expect(commands.filter(([command]) => command === 'zscore')).toEqual([]);
    const adds = named('zadd', at.tracked);
    expect(adds).toHaveLength(1);
    expect(adds[0]?.filter((_, i) => i >= 2 && i % 2 === 1)).toEqual(refs.map((r) => r.dispatchId));
    for (const { dispatchId } of refs)
      expect(await ns.redis.zscore(at.tracked, dispatchId)).not.toBeNull();
  });

  it('ACQUIRE: a reservation is marked on its record until it is spent', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [a, b] = await sent('a', 'b');
    const rate = { max: 1, windowMs: 300 };
    const reservedOn = (ref: DispatchRef) => ns.redis.hget(at.dispatch(ref.dispatchId), 'reserved');
    expect((await store.acquire(a!, rate, 250, 60_000, 'A')).kind).toBe('go');
    expect(await reservedOn(a!)).toBeNull();

    const waiting = await store.acquire(b!, rate, 250, 60_000, 'B');
    expect(waiting.kind).toBe('over');
    expect(await reservedOn(b!)).toBe('1');
    expect(await ns.redis.zscore(at.budget('p'), `r:${b!.dispatchId}`)).not.toBeNull();
    // Woken before its slot: still over, still marked.
    expect((await store.acquire(b!, rate, 250, 60_000, 'B')).kind).toBe('over');
    expect(await reservedOn(b!)).toBe('1');

    const slot = Number(await ns.redis.zscore(at.budget('p'), `r:${b!.dispatchId}`));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, slot - Date.now()) + 20));
    expect((await store.acquire(b!, rate, 250, 60_000, 'B')).kind).toBe('go');
    expect(await reservedOn(b!)).toBeNull();
    // The slot spent; A's entry, a window old, is trimmed from the log.
    expect(await ns.redis.zrange(at.budget('p'), 0, -1)).toEqual([`${b!.dispatchId}:1`]);
  });

  it('ACQUIRE, MARK_SENT and FINISH: an item that fails fails alone, writing nothing; the others stand, tracked set included', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [a, broken, c] = await sent('a', 'b', 'c');
    const rate = { max: 10, windowMs: 60_000 };
    await ns.redis.del(at.dispatch(broken!.dispatchId));
    await ns.redis.set(at.dispatch(broken!.dispatchId), 'not a hash');

    const acquired = await Promise.allSettled([
      store.acquire(a!, rate, 50, 60_000, 'A'),
      store.acquire(broken!, rate, 50, 60_000, 'B'),
      store.acquire(c!, rate, 50, 60_000, 'C'),
    ]);
    expect(acquired.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((acquired[1] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
    for (const ref of [a!, c!]) {
      expect((await store.sends.get(ref.dispatchId))?.state).toBe('sending');
      expect(await ns.redis.zscore(at.tracked, ref.dispatchId)).not.toBeNull();
    }
    expect(await ns.redis.get(at.dispatch(broken!.dispatchId))).toBe('not a hash');
    expect(await ns.redis.zscore(at.tracked, broken!.dispatchId)).toBeNull();

    await ns.redis.zrem(at.tracked, a!.dispatchId);
    const marked = await Promise.allSettled([
      store.markSent(a!, 'sent', undefined, 60_000, 'A'),
      store.markSent(broken!, 'sent', undefined, 60_000, 'B'),
    ]);
    expect(marked.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect((await store.sends.get(a!.dispatchId))?.state).toBe('sent');
    expect(await ns.redis.zscore(at.tracked, a!.dispatchId)).not.toBeNull();

    const record = await store.sends.get(a!.dispatchId);
    const ended = await Promise.allSettled([
      store.finish(record!, { type: 'followup.completed' }),
      store.finish(
        { ...record!, dispatchId: broken!.dispatchId, jobId: 'b' },
        { type: 'followup.completed' },
      ),
    ]);
    expect(ended.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect((await store.sends.get(a!.dispatchId))?.state).toBe('done');
    expect(await ns.redis.zscore(at.tracked, a!.dispatchId)).toBeNull();
  });

  it('MARK_SENT: one call, each answered for its own attempt', async () => {
    const { store } = fixture();
    const [a, b] = await sent('a', 'b');
    const rate = { max: 10, windowMs: 60_000 };
    await store.acquire(a!, rate, 50, 60_000, 'A');
    await store.acquire(b!, rate, 50, 60_000, 'B');
    const job = { id: 'a', status: 'active' as const };
    const scriptCalls = countScriptCalls();
    const watch = await watchScriptCommands();

    const results = await Promise.all([
      store.markSent(a!, 'sent', job, 1_000, 'A'),
      store.markSent(b!, 'sent', undefined, 1_000, 'not B'),
      store.markSent(b!, 'unsettled', undefined, 1_000, 'B'),
    ]);

    expect(scriptCalls()).toBe(1);
    expect(results).toEqual(['marked', 'stale', 'marked']);
    const adds = (await watch.stop()).filter(([command]) => command === 'zadd');
    expect(adds.map(([, key, ...members]) => [key, members.length])).toEqual([
      [keysFor(fixture().ns.prefix).tracked, 4],
    ]);
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
    const watch = await watchScriptCommands();

    const answers = await Promise.all([
      store.finish(a, { type: 'followup.cancelled' }),
      store.finish(c, { type: 'followup.cancelled' }, 'sent'),
      store.finish(d, { type: 'followup.cancelled' }),
      store.finish(d, { type: 'followup.cancelled' }),
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
    const at = keysFor(ns.prefix);
    const removals = (await watch.stop()).filter(([command]) => command === 'zrem');
    // One ZREM of each shared key for the call, of the two that finished.
    expect(removals.filter(([, key]) => key === at.tracked || key === at.open)).toEqual([
      ['zrem', at.tracked, first, twice],
      ['zrem', at.open, first, twice],
    ]);
    expect(await store.sends.isNext({ dispatchId: second, projectId: 'p', jobId: 'j' })).toBe(true);
    expect((await record(other)).state).toBe('queued');
  });
});
