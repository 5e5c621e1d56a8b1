import { describe, expect, it } from 'vitest';
import type { DispatchRef } from '../../src/dispatch/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

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
    expect(await ns.redis.lrange(keys.lane('p', 'j'), 0, -1)).toEqual([
      second?.dispatchId,
      third?.dispatchId,
    ]);
    // A head whose record exists still blocks the next.
    expect((await acquire(third as DispatchRef)).kind).toBe('blocked');
  });
});
