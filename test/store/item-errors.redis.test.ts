import { describe, expect, it } from 'vitest';
import { StoreItemError } from '../../src/store/call-batch.js';
import type { DispatchRef } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

/**
 * One item of a batched script call (ACQUIRE, MARK_SENT, RESCHEDULE, FINISH) whose keys or stored
 * values are broken fails alone, writing nothing; the others of its call complete as alone.
 */
describe('a broken item of a batched call', () => {
  const fixture = useStore('item-errors');
  const rate = { max: 10, windowMs: 60_000 };

  /** One follow-up of each project named, agent job `j`. */
  async function sent(...projects: string[]): Promise<DispatchRef[]> {
    const results = await fixture().producer.sendMany(
      projects.map((projectId) => ({ projectId, jobId: 'j', prompt: `to ${projectId}` })),
    );
    return results.map(({ dispatchId }, i) => ({
      dispatchId,
      projectId: projects[i]!,
      jobId: 'j',
    }));
  }

  /** Every key of the namespace with its type and contents, to compare writes. */
  async function snapshot(): Promise<Record<string, string>> {
    const { ns } = fixture();
    const keys = (await ns.redis.keys(`${ns.prefix}*`)).sort();
    const out: Record<string, string> = {};
    for (const key of keys) out[key] = (await ns.redis.dumpBuffer(key))?.toString('hex') ?? '';
    return out;
  }

  it('ACQUIRE: a limit out of range or a budget of the wrong type fails its own item only', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [healthy1, evil, healthy2, wrong] = await sent('h1', 'evil', 'h2', 'wrong');
    // As `project limit evil 1/10000000000d` stored it: PEXPIRE cannot take its window.
    await ns.redis.hset(at.projectControls('evil'), {
      limit: '1/10000000000d',
      max: 1,
      windowMs: 864_000_000_000_000_000,
      toleranceMs: 500,
    });
    await ns.redis.set(at.budget('wrong'), 'a budget log overwritten by hand');
    const before = { evil: await store.sends.get(evil!.dispatchId), wrongBudget: 'string' };

    const acquired = await Promise.allSettled(
      [healthy1, evil, healthy2, wrong].map((ref, i) =>
        store.acquire(ref!, rate, 50, 60_000, `T${i}`),
      ),
    );
    expect(acquired.map((r) => r.status)).toEqual([
      'fulfilled',
      'rejected',
      'fulfilled',
      'rejected',
    ]);
    expect((acquired[0] as PromiseFulfilledResult<{ kind: string }>).value.kind).toBe('go');
    expect((acquired[2] as PromiseFulfilledResult<{ kind: string }>).value.kind).toBe('go');
    const evilErr = (acquired[1] as PromiseRejectedResult).reason as StoreItemError;
    expect(evilErr).toBeInstanceOf(StoreItemError);
    expect(evilErr).toMatchObject({ op: 'acquire', key: at.projectControls('evil') });
    expect(evilErr.why).toMatch(/windowMs/);
    const wrongErr = (acquired[3] as PromiseRejectedResult).reason as StoreItemError;
    expect(wrongErr).toMatchObject({ op: 'acquire', key: at.budget('wrong') });
    expect(wrongErr.why).toMatch(/WRONGTYPE/);
    // The broken items wrote nothing; the healthy ones are tracked.
    expect(await store.sends.get(evil!.dispatchId)).toEqual(before.evil);
    expect(await ns.redis.exists(at.budget('evil'))).toBe(0);
    expect(await ns.redis.type(at.budget('wrong'))).toBe(before.wrongBudget);
    expect(await ns.redis.zscore(at.tracked, evil!.dispatchId)).toBeNull();
    expect(await ns.redis.zscore(at.tracked, healthy1!.dispatchId)).not.toBeNull();
    expect(await ns.redis.zscore(at.tracked, healthy2!.dispatchId)).not.toBeNull();

    // Repaired, it goes by itself.
    await ns.redis.del(at.projectControls('evil'), at.budget('wrong'));
    const again = await Promise.all(
      [evil, wrong].map((ref, i) => store.acquire(ref!, rate, 50, 60_000, `R${i}`)),
    );
    expect(again.map((v) => v.kind)).toEqual(['go', 'go']);
  });

  it('ACQUIRE: a send pause or prompt of the wrong type is named, nothing written', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [bad, healthy] = await sent('bad', 'h');
    const [head, second] = await sent('lane', 'lane');
    await ns.redis.set(at.authPause, 'a send pause overwritten by hand');
    await ns.redis.del(at.prompt(bad!.dispatchId));
    await ns.redis.sadd(at.prompt(bad!.dispatchId), 'not a prompt');
    const untouched = await snapshot();
    const tries = () =>
      Promise.allSettled(
        [bad, healthy, second].map((ref, i) => store.acquire(ref!, rate, 50, 60_000, `T${i}`)),
      );
    // A broken send pause stops every send, each answer naming it (or a broken key of its own).
    const paused = await tries();
    expect(paused.map((r) => ((r as PromiseRejectedResult).reason as StoreItemError).key)).toEqual([
      at.prompt(bad!.dispatchId),
      at.authPause,
      at.authPause,
    ]);
    expect(await snapshot()).toEqual(untouched);

    await ns.redis.del(at.authPause);
    const acquired = await tries();
    expect(acquired.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    expect((acquired[0] as PromiseRejectedResult).reason).toMatchObject({
      key: at.prompt(bad!.dispatchId),
      why: expect.stringMatching(/WRONGTYPE/),
    });
    expect((acquired[2] as PromiseFulfilledResult<{ kind: string }>).value.kind).toBe('blocked');
    const after = await snapshot();
    for (const ref of [bad, head, second])
      expect(after[at.dispatch(ref!.dispatchId)]).toBe(untouched[at.dispatch(ref!.dispatchId)]);
    expect(after[at.budget('bad')]).toBeUndefined();
  });

  it('ACQUIRE retried with its attempt token: an attempt count out of range is named, not sent', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [ref] = await sent('p');
    expect(await store.acquire(ref!, rate, 50, 60_000, 'A')).toMatchObject({ kind: 'go' });
    await ns.redis.hset(at.dispatch(ref!.dispatchId), 'attempts', 'many');
    await expect(store.acquire(ref!, rate, 50, 60_000, 'A')).rejects.toMatchObject({
      op: 'acquire',
      key: at.dispatch(ref!.dispatchId),
      why: expect.stringMatching(/attempts/),
    });
  });

  it('ACQUIRE: controls and park of the wrong type are named in the answer', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [controlled, parked] = await sent('c', 'k');
    await ns.redis.sadd(at.projectControls('c'), 'not a hash');
    await ns.redis.sadd(at.park('k'), 'not a time');
    const acquired = await Promise.allSettled(
      [controlled, parked].map((ref, i) => store.acquire(ref!, rate, 50, 60_000, `T${i}`)),
    );
    expect(
      acquired.map((r) => ((r as PromiseRejectedResult).reason as StoreItemError).key),
    ).toEqual([at.projectControls('c'), at.park('k')]);
  });

  it('ACQUIRE: a park or probe time past any real one is named, not answered as a wait', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [huge, infinite] = await sent('huge', 'inf');
    // Lua turned these into integer replies of -9223372036854775808: a park in the past, retried
    // at once, for ever.
    await ns.redis.set(at.park('huge'), '1e300');
    await ns.redis.set(at.park('inf'), 'inf');
    const acquire = () =>
      Promise.allSettled(
        [huge, infinite].map((ref, i) => store.acquire(ref!, rate, 50, 60_000, `T${i}`)),
      );
    const parked = await acquire();
    expect(parked.map((r) => ((r as PromiseRejectedResult).reason as StoreItemError).key)).toEqual([
      at.park('huge'),
      at.park('inf'),
    ]);
    await ns.redis.del(at.park('huge'), at.park('inf'));
    await ns.redis.hset(at.authPause, { probeAt: 'inf', backoffMs: 1_000, maxBackoffMs: 60_000 });
    const paused = await acquire();
    expect(paused.map((r) => ((r as PromiseRejectedResult).reason as StoreItemError).key)).toEqual([
      at.authPause,
      at.authPause,
    ]);
  });

  it("the shard's open counts or dead letters of the wrong type fail a call before its first write", async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [a] = await sent('a');
    await store.acquire(a!, rate, 50, 60_000, 'A');
    await ns.redis.set(at.openCounts, 'not a hash');
    let untouched = await snapshot();
    const [marked] = await Promise.allSettled([store.markSent(a!, 'sent', undefined, 60_000, 'A')]);
    expect((marked as PromiseRejectedResult).reason).toMatchObject({ key: at.openCounts });
    expect(await snapshot()).toEqual(untouched);
    await expect(sent('b')).rejects.toThrow(/WRONGTYPE/);
    expect(await ns.redis.keys(at.dispatch('*'))).toEqual([at.dispatch(a!.dispatchId)]);

    await ns.redis.del(at.openCounts);
    await store.markSent(a!, 'sent', undefined, 60_000, 'A');
    await ns.redis.set(at.deadLetters, 'not a sorted set');
    untouched = await snapshot();
    const record = await store.sends.get(a!.dispatchId);
    const [ended] = await Promise.allSettled([
      store.finish(record!, { type: 'followup.undeliverable', reason: 'bad_request' }),
    ]);
    expect((ended as PromiseRejectedResult).reason).toMatchObject({ key: at.deadLetters });
    expect(await snapshot()).toEqual(untouched);
    expect(await ns.redis.xlen(ns.eventsStream)).toBe(0);
  });

  it('MARK_SENT, RESCHEDULE and FINISH: a record of the wrong type fails its own item only', async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [a, broken] = await sent('a', 'b');
    await store.acquire(a!, rate, 50, 60_000, 'A');
    await store.acquire(broken!, rate, 50, 60_000, 'B');
    await ns.redis.zrem(at.tracked, a!.dispatchId);
    await ns.redis.del(at.dispatch(broken!.dispatchId));
    await ns.redis.sadd(at.dispatch(broken!.dispatchId), 'not a hash');
    const untouched = await snapshot();

    const marked = await Promise.allSettled([
      store.markSent(broken!, 'sent', undefined, 60_000, 'B'),
      store.markSent(a!, 'sent', undefined, 60_000, 'A'),
    ]);
    expect(marked.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect((marked[0] as PromiseRejectedResult).reason).toMatchObject({
      op: 'mark_sent',
      key: at.dispatch(broken!.dispatchId),
    });
    expect((await store.sends.get(a!.dispatchId))?.state).toBe('sent');
    expect(await ns.redis.zscore(at.tracked, a!.dispatchId)).not.toBeNull();

    await ns.redis.zadd(at.tracked, 1, broken!.dispatchId);
    const moved = await Promise.allSettled([
      store.tracking.reschedule(broken!.dispatchId, 5_000, { pollDelayMs: 5_000 }),
      store.tracking.reschedule(a!.dispatchId, 5_000, { pollDelayMs: 5_000 }),
    ]);
    expect(moved.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect(await ns.redis.zscore(at.tracked, broken!.dispatchId)).toBe('1');

    const record = await store.sends.get(a!.dispatchId);
    const ended = await Promise.allSettled([
      store.finish(
        { ...record!, dispatchId: broken!.dispatchId, projectId: 'b' },
        { type: 'followup.completed' },
      ),
      store.finish(record!, { type: 'followup.completed' }),
    ]);
    expect(ended.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect((await store.sends.get(a!.dispatchId))?.state).toBe('done');
    const after = await snapshot();
    expect(after[at.dispatch(broken!.dispatchId)]).toBe(untouched[at.dispatch(broken!.dispatchId)]);
    expect(await ns.redis.xlen(ns.eventsStream)).toBe(1);
  });

  it("FINISH: its lane's keys or the stream of the wrong type are named, nothing written", async () => {
    const { ns, store } = fixture();
    const at = keysFor(ns.prefix);
    const [head, , alone] = await sent('l', 'l', 'm');
    await store.acquire(head!, rate, 50, 60_000, 'A');
    await store.acquire(alone!, rate, 50, 60_000, 'C');
    const finishOf = async (ref: DispatchRef) =>
      store.finish((await store.sends.get(ref.dispatchId))!, { type: 'followup.completed' });

    // A lane of two: its head is the list's first, not a field of the lane heads.
    await ns.redis.set(at.lane('l', 'j'), 'not a list');
    let untouched = await snapshot();
    await expect(finishOf(head!)).rejects.toMatchObject({ op: 'finish', key: at.lane('l', 'j') });
    expect(await snapshot()).toEqual(untouched);

    await ns.redis.set(at.laneHeads('m'), 'not a hash');
    untouched = await snapshot();
    await expect(finishOf(alone!)).rejects.toMatchObject({ key: at.laneHeads('m') });
    expect(await snapshot()).toEqual(untouched);

    await ns.redis.set(ns.eventsStream, 'not a stream');
    await ns.redis.del(at.laneHeads('m'));
    await ns.redis.hset(at.laneHeads('m'), 'j', alone!.dispatchId);
    untouched = await snapshot();
    await expect(finishOf(alone!)).rejects.toMatchObject({ key: ns.eventsStream });
    expect(await snapshot()).toEqual(untouched);
  });

  it('FINISH: a stream that takes no more entries is named, and the follow-up is not ended without its event', async () => {
    const { ns, store } = fixture();
    const [ref] = await sent('s');
    await store.acquire(ref!, rate, 50, 60_000, 'A');
    // The last ID a stream can hold: XADD * fails with every later entry.
    await ns.redis.xadd(ns.eventsStream, '18446744073709551615-18446744073709551615', 'f', 'v');
    const untouched = await snapshot();
    const record = await store.sends.get(ref!.dispatchId);
    await expect(store.finish(record!, { type: 'followup.completed' })).rejects.toMatchObject({
      op: 'finish',
      key: ns.eventsStream,
    });
    expect(await snapshot()).toEqual(untouched);
  });
});
