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
    fixture().store.acquire(ref, RATE, 50, 60_000, `token-${ref.dispatchId}`);

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

  const finish = async (ref: DispatchRef) => {
    const record = await fixture().store.sends.get(ref.dispatchId);
    if (!record) throw new Error(`no record of ${ref.dispatchId}`);
    return fixture().store.finish(record, { type: 'followup.cancelled' });
  };

  it('drops a head that has ended: an id registered again after its record was lost stands in its lane twice', async () => {
    const { ns, producer } = fixture();
    const send = () => producer.send({ projectId: 'p', jobId: 'j', prompt: 'x', key: 'twice' });
    const { dispatchId } = await send();
    const ref: DispatchRef = { dispatchId, projectId: 'p', jobId: 'j' };
    // The record is lost (a crash, a hand edit); the producer sends the key again: same id, new record.
    await ns.redis.del(keysFor(ns.prefix).dispatch(dispatchId));
    expect((await send()).dispatchId).toBe(dispatchId);
    expect(await laneIds(ns.redis, ns.prefix, 'p', 'j')).toEqual([dispatchId, dispatchId]);
    expect((await acquire(ref)).kind).toBe('go');
    const record = await fixture().store.sends.get(dispatchId);
    if (!record) throw new Error(`no record of ${dispatchId}`);
    await fixture().store.finish(record, { type: 'followup.cancelled' });
    // Its FINISH handed on one of the two; the next follow-up of the job does not wait for the
    // ended record to expire.
    const [next] = (await lane(['next'])) as DispatchRef[];
    expect(await acquire(next as DispatchRef)).toMatchObject({ kind: 'go', prompt: 'next' });
    expect(await laneIds(ns.redis, ns.prefix, 'p', 'j')).toEqual([next?.dispatchId]);
  });

  it("keeps a lane of one as its project's lane heads field; two or more as a list, head first", async () => {
    const { ns } = fixture();
    const keys = keysFor(ns.prefix);
    const [first] = (await lane(['one'])) as DispatchRef[];
    expect(await ns.redis.hget(keys.laneHeads('p'), 'j')).toBe(first?.dispatchId);
    expect(await ns.redis.exists(keys.lane('p', 'j'))).toBe(0);
    // A second follow-up moves the lane into its list.
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
  it("a creation's end hands its job to the next record only, never failing on one of another type", async () => {
    const { ns, producer } = fixture();
    const keys = keysFor(ns.prefix);
    const c = await producer.create({ projectId: 'p', prompt: 'c' });
    const [f1, f2] = await producer.sendMany(
      ['one', 'two'].map((prompt) => ({ projectId: 'p', after: c.dispatchId, prompt })),
    );
    const cRef: DispatchRef = {
      dispatchId: c.dispatchId,
      projectId: 'p',
      jobId: `created:${c.dispatchId}`,
    };
    await ns.redis.hset(keys.dispatch(c.dispatchId), 'target', 'made-1');
    // The next record is replaced by a key of another type (a hand edit).
    await ns.redis.del(keys.dispatch(f1!.dispatchId));
    await ns.redis.set(keys.dispatch(f1!.dispatchId), 'not a hash');
    expect(await finish(cRef)).toMatchObject({ nextDispatchId: f1!.dispatchId });
    expect(await ns.redis.hget(keys.dispatch(c.dispatchId), 'state')).toBe('done');
    expect(await ns.redis.hget(keys.dispatch(f2!.dispatchId), 'target')).toBeNull();
  });
});
