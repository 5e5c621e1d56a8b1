import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { usePrivateRedis } from '../support/redis-server.js';
import { laneIds, openDispatches } from '../support/where-is.js';

/**
 * The producer's MULTI holds REGISTER and BullMQ's job add. A script the server forgot (SCRIPT
 * FLUSH, or a restart with the connection kept) must not fail one command of the transaction and
 * commit the other: both land, or neither. Its own server: a flush would disturb other tests.
 */
describe('the producer after the server forgot its scripts', () => {
  const served = usePrivateRedis();

  it('still registers each follow-up together with its job, atomically', async () => {
    const prefix = 'flush';
    const keys = keysFor(prefix);
    const producer = createProducer({ redisUrl: served().server.url, prefix });
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: served().redis.duplicate(),
      prefix,
    });
    try {
      const before = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'first' });
      expect(await served().redis.script('FLUSH')).toBe('OK');
      const after = await producer.sendMany([
        { projectId: 'p', jobId: 'j', prompt: 'second' },
        { projectId: 'p', jobId: 'k', prompt: 'third' },
      ]);
      expect(after.map((r) => r.deduplicated)).toEqual([false, false]);
      const ids = [before, ...after].map((r) => r.dispatchId);
      for (const id of ids) {
        expect(await served().redis.hget(keys.dispatch(id), 'state')).toBe('queued');
        expect(await queue.getJobState(id)).toBe('waiting');
      }
      expect(await laneIds(served().redis, keys.prefix, 'p', 'j')).toEqual(ids.slice(0, 2));
      expect((await openDispatches(served().redis, keys.prefix)).count).toBe(3);
    } finally {
      await queue.close();
      await producer.close();
    }
  });

  it("sends BullMQ's 20 KB job add by SHA once loaded: each send loads only REGISTER", async () => {
    const producer = createProducer({ redisUrl: served().server.url, prefix: 'loads' });
    try {
      await producer.send({ projectId: 'p', jobId: 'warm', prompt: 'loads the scripts' });
      const before = await scriptCalls(served().redis);
      for (let i = 0; i < 5; i++)
        await producer.send({ projectId: 'p', jobId: `j${i}`, prompt: 'x' });
      await producer.sendMany(
        [1, 2, 3].map((i) => ({ projectId: 'p', jobId: `m${i}`, prompt: 'y' })),
      );
      const after = await scriptCalls(served().redis);
      // Six transactions: one SCRIPT LOAD (REGISTER) each, and every script call by SHA: one
      // REGISTER per transaction, one job add per follow-up.
      expect(after.load - before.load).toBe(6);
      expect(after.eval - before.eval).toBe(0);
      expect(after.evalsha - before.evalsha).toBe(6 + 8);
      // Each transaction: REGISTER's source (about 6.2 KB, with the check of a key's claim across
      // shards, a deadline, the project's open counts, the types of the keys it writes and the
      // creations a follow-up is chained to) and the rest of the MULTI (about 1 KB); BullMQ's job
      // add alone would be 20 KB.
      expect(after.loadedBytes - before.loadedBytes).toBeLessThan(6 * 8_192);
    } finally {
      await producer.close();
    }
  });
});

/** SCRIPT LOAD, EVAL and EVALSHA calls so far, and the bytes the server received. */
async function scriptCalls(redis: Redis) {
  const stats = await redis.info('commandstats');
  const calls = (name: string) =>
    Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
  const net = await redis.info('stats');
  return {
    load: calls('script\\|load'),
    eval: calls('eval'),
    evalsha: calls('evalsha'),
    loadedBytes: Number(/^total_net_input_bytes:(\d+)/m.exec(net)?.[1] ?? 0),
  };
}
