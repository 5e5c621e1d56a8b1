import { describe, expect, it } from 'vitest';
import type { DispatchRef } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';
import { laneIds } from '../support/where-is.js';

const RATE = { max: 100, windowMs: 60_000 };

describe('a lane (ACQUIRE)', () => {
  const fixture = useStore('lanes');

  async function lane(prompts: readonly string[]): Promise<DispatchRef[]> {
    const results = await fixture().producer.sendMany(
      prompts.map((prompt) => ({ projectId: 'p', jobId: 'j', prompt })),
    );
    return results.map(({ dispatchId }) => ({ dispatchId, projectId: 'p', jobId: 'j' }));
  }
  const acquire = (ref: DispatchRef) =>
    fixture().store.sends.acquire(ref, RATE, 50, 60_000, `token-${ref.dispatchId}`);

  it('lets only its head go; the next waits', async () => {
    const [first, second] = await lane(['one', 'two']);
    expect((await acquire(second as DispatchRef)).kind).toBe('blocked');
    expect((await acquire(first as DispatchRef)).kind).toBe('go');
    expect((await acquire(second as DispatchRef)).kind).toBe('blocked');
  });

  it('drops a head whose record is gone (deleted by hand, lost in a crash), so the lane moves on', async () => {
    const [first, second, third] = (await lane(['one', 'two', 'three'])) as DispatchRef[];
    const { ns } = fixture();
    const keys = keysFor(ns.prefix);
    await ns.redis.del(keys.dispatch((first as DispatchRef).dispatchId));
    expect(await acquire(second as DispatchRef)).toMatchObject({ kind: 'go', prompt: 'two' });
    expect(await laneIds(ns.redis, ns.prefix, 'p', 'j')).toEqual([
      second?.dispatchId,
      third?.dispatchId,
    ]);
    // A head whose record exists still blocks the next.
    expect((await acquire(third as DispatchRef)).kind).toBe('blocked');
  });

  it('drops a head whose record has ended (a FINISH that did not hand the lane on)', async () => {
    const [first] = (await lane(['one'])) as DispatchRef[];
    const { ns } = fixture();
    // What an earlier version's FINISH leaves of a lane of one kept as a field: the record done,
    // the field kept. The next follow-up of the job must not wait for the record to expire.
    await ns.redis.hset(keysFor(ns.prefix).dispatch(first?.dispatchId ?? ''), 'state', 'done');
    const [second] = (await lane(['two'])) as DispatchRef[];
    expect(await acquire(second as DispatchRef)).toMatchObject({ kind: 'go', prompt: 'two' });
    expect(await laneIds(ns.redis, ns.prefix, 'p', 'j')).toEqual([second?.dispatchId]);
  });

  const finish = async (ref: DispatchRef) => {
    const record = await fixture().store.sends.get(ref.dispatchId);
    if (!record) throw new Error(`no record of ${ref.dispatchId}`);
    return fixture().store.tracking.finish(record, { type: 'followup.cancelled' });
  };

  it("keeps a lane of one as its project's lane heads field; two or more as a list, head first", async () => {
    const { ns } = fixture();
    const keys = keysFor(ns.prefix);
    const [first] = (await lane(['one'])) as DispatchRef[];
    expect(await ns.redis.hget(keys.laneHeads('p'), 'j')).toBe(first?.dispatchId);
    expect(await ns.redis.exists(keys.lane('p', 'j'))).toBe(0);
    // A second follow-up moves the lane into its list, laid out as earlier versions read it.
    const [second, third] = (await lane(['two', 'three'])) as DispatchRef[];
    expect(await ns.redis.hget(keys.laneHeads('p'), 'j')).toBeNull();
    expect(await ns.redis.lrange(keys.lane('p', 'j'), 0, -1)).toEqual(
      [first, second, third].map((r) => r?.dispatchId),
    );
    // The head ends: the next one takes its turn.
    expect(await finish(first as DispatchRef)).toMatchObject({
      nextDispatchId: second?.dispatchId,
    });
    expect(await laneIds(ns.redis, ns.prefix, 'p', 'j')).toEqual([
      second?.dispatchId,
      third?.dispatchId,
    ]);
    // One behind the head ends (a cancel): the head stays, and is named as the lane's head.
    expect(await finish(third as DispatchRef)).toMatchObject({
      nextDispatchId: second?.dispatchId,
    });
    expect(await finish(second as DispatchRef)).toMatchObject({ nextDispatchId: undefined });
    expect(await ns.redis.exists(keys.lane('p', 'j'), keys.laneHeads('p'))).toBe(0);
  });

  it("keeps the order when an earlier version's producer pushed onto a lane of one", async () => {
    const { ns } = fixture();
    const keys = keysFor(ns.prefix);
    const [first, second] = (await lane(['one', 'two'])) as DispatchRef[];
    // What an earlier version's REGISTER (an RPUSH) makes of a lane of one kept as a field.
    await ns.redis.del(keys.lane('p', 'j'));
    await ns.redis.hset(keys.laneHeads('p'), 'j', first?.dispatchId ?? '');
    await ns.redis.rpush(keys.lane('p', 'j'), second?.dispatchId ?? '');
    const [third] = (await lane(['three'])) as DispatchRef[];
    expect(await laneIds(ns.redis, ns.prefix, 'p', 'j')).toEqual(
      [first, second, third].map((r) => r?.dispatchId),
    );
    expect(await fixture().store.sends.isNext(second as DispatchRef)).toBe(false);
    expect(await fixture().store.sends.isNext(first as DispatchRef)).toBe(true);
    expect((await acquire(second as DispatchRef)).kind).toBe('blocked');
    expect((await acquire(first as DispatchRef)).kind).toBe('go');
    await finish(first as DispatchRef);
    expect((await acquire(third as DispatchRef)).kind).toBe('blocked');
    expect(await acquire(second as DispatchRef)).toMatchObject({ kind: 'go', prompt: 'two' });
  });
});
