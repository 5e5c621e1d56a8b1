import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

/**
 * A batch whose REGISTER fails inside the producer's MULTI (a key of the wrong type, written by
 * hand) is refused whole: the BullMQ jobs the same MULTI added must not stay behind, or a worker
 * would end each with an event for a follow-up nobody accepted.
 */
describe('a batch that REGISTER refuses', () => {
  const ns = useNamespace('refused-register');
  const producer = useOpened('producer', () =>
    createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix }),
  );
  const queue = useOpened(
    'queue',
    () =>
      new Queue(QUEUE_NAMES.dispatch, { connection: ns().redis.duplicate(), prefix: ns().prefix }),
  );

  it('leaves no BullMQ job, no record and no event; the batch goes once the key is repaired', async () => {
    const keys = keysFor(ns().prefix);
    await ns().redis.set(keys.openCounts, 'not a hash');
    const batch = [
      { projectId: 'p', jobId: 'a', prompt: 'one' },
      { projectId: 'p', jobId: 'b', prompt: 'two', key: 'k-2' },
    ];
    await expect(producer().sendMany(batch)).rejects.toMatchObject({ code: 'redis_error' });
    const counts = await queue().getJobCounts('wait', 'delayed', 'prioritized', 'active');
    expect(counts).toEqual({ wait: 0, delayed: 0, prioritized: 0, active: 0 });
    expect(await ns().redis.keys(keys.dispatch('*'))).toEqual([]);
    expect(await ns().redis.exists(ns().eventsStream)).toBe(0);

    await ns().redis.del(keys.openCounts);
    const sent = await producer().sendMany(batch);
    expect(sent).toHaveLength(2);
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 2 });
  });

  // Each a key REGISTER writes after its first write of the batch: the call fails on it before
  // writing anything, so a retry sends the keyless follow-up once.
  const laterKeys = {
    'lane projects': (keys: ReturnType<typeof keysFor>) => keys.laneProjects,
    'open index': (keys: ReturnType<typeof keysFor>) => keys.open,
    'lane of two': (keys: ReturnType<typeof keysFor>) => keys.lane('p', 'b'),
    'lane heads': (keys: ReturnType<typeof keysFor>) => keys.laneHeads('p'),
  };
  for (const [name, keyOf] of Object.entries(laterKeys)) {
    it(`writes nothing when the ${name} key has the wrong type`, async () => {
      const keys = keysFor(ns().prefix);
      const broken = keyOf(keys);
      await ns().redis.set(broken, 'not of its type');
      const batch = [
        { projectId: 'p', jobId: 'a', prompt: 'one' },
        { projectId: 'p', jobId: 'b', prompt: 'two', key: 'k-2' },
        { projectId: 'p', jobId: 'b', prompt: 'three', key: 'k-3' },
      ];
      await expect(producer().sendMany(batch)).rejects.toMatchObject({ code: 'redis_error' });
      expect(await queue().getJobCounts('wait')).toEqual({ wait: 0 });
      expect(await ns().redis.keys(keys.dispatch('*'))).toEqual([]);
      expect(await ns().redis.keys(keys.prompt('*'))).toEqual([]);
      expect(await ns().redis.exists(keys.openCounts)).toBe(0);

      await ns().redis.del(broken);
      const sent = await producer().sendMany(batch);
      expect(sent.map((s) => s.deduplicated)).toEqual([false, false, false]);
      expect(await ns().redis.keys(keys.dispatch('*'))).toHaveLength(3);
      expect(await queue().getJobCounts('wait')).toEqual({ wait: 3 });
      expect(await ns().redis.hgetall(keys.openCounts)).toEqual({ 'q:p': '3' });
    });
  }
});
