import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';

/**
 * The producer's MULTI holds REGISTER and BullMQ's job add. A script the server forgot (SCRIPT
 * FLUSH, or a restart with the connection kept) must not fail one command of the transaction and
 * commit the other: both land, or neither. Its own server: a flush would disturb other tests.
 */
describe('the producer after the server forgot its scripts', () => {
  let server: PrivateRedis;
  let redis: Redis;

  beforeAll(async () => {
    server = await startPrivateRedis();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.destroy();
  });

  it('still registers each follow-up together with its job, atomically', async () => {
    const prefix = 'flush';
    const keys = keysFor(prefix);
    const producer = createProducer({ redisUrl: server.url, prefix });
    const queue = new Queue(QUEUE_NAMES.dispatch, { connection: redis.duplicate(), prefix });
    try {
      const before = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'first' });
      expect(await redis.script('FLUSH')).toBe('OK');
      const after = await producer.sendMany([
        { projectId: 'p', jobId: 'j', prompt: 'second' },
        { projectId: 'p', jobId: 'k', prompt: 'third' },
      ]);
      const ids = [before, ...after].map((r) => r.dispatchId);
      for (const id of ids) {
        expect(await redis.hget(keys.dispatch(id), 'state')).toBe('queued');
        expect(await queue.getJobState(id)).toBe('waiting');
      }
      expect(await redis.lrange(keys.lane('p', 'j'), 0, -1)).toEqual(ids.slice(0, 2));
      expect(await redis.zcard(keys.open)).toBe(3);
    } finally {
      await queue.close();
      await producer.close();
    }
  });
});
