import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baselineRetained, oursRetained } from '../../bench/retained.js';
import { BASELINE_QUEUE } from '../../bench/workload.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';

/**
 * The bench's look at what finished follow-ups leave in Redis, on a private server (it changes a
 * server setting for a moment, which a shared server's other users must not see).
 */
describe('what a follow-up leaves in Redis after its event (bench)', () => {
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

  const ns = { prefix: 'retained', eventsStream: 'retained:events' };
  const snapshot = JSON.stringify({
    id: 'job_1',
    status: 'completed',
    source: { repository: 'https://github.com/acme/docs', ref: 'main' },
    prLink: 'https://github.com/acme/docs/pull/7',
    createdAt: '2026-11-24T09:00:00.000Z',
  });

  it('weighs each kept key, names its encoding and its listpack size, and puts the setting back', async () => {
    const keys = keysFor(ns.prefix);
    const queue = `${ns.prefix}:${QUEUE_NAMES.dispatch}`;
    for (const id of ['a1', 'a2']) {
      await redis.hset(keys.dispatch(id), 'projectId', 'p', 'jobId', id, 'state', 'done');
      await redis.hset(keys.dispatch(id), 'job', snapshot);
      await redis.hset(`${queue}:${id}`, 'name', 'followup', 'data', '{"p":"p","j":"j"}');
      await redis.zadd(`${queue}:completed`, 1, id);
      await redis.xadd(ns.eventsStream, '*', 'type', 'followup.completed', 'dispatchId', id);
    }
    const before = await redis.dbsize();

    const line = await oursRetained(redis, ns);

    const record = /the record (\d+) B \(hashtable; (\d+) B as a listpack/.exec(line);
    expect(record, line).not.toBeNull();
    expect(Number(record?.[2])).toBeLessThan(Number(record?.[1]));
    expect(line).toMatch(/the completed BullMQ job \d+ B \(listpack\)/);
    expect(await redis.config('GET', 'hash-max-listpack-value')).toEqual([
      'hash-max-listpack-value',
      '64',
    ]);
    expect(await redis.dbsize()).toBe(before);
  });

  it("weighs the baseline's completed jobs, BullMQ's ids 1 to n", async () => {
    const queue = `${ns.prefix}:${BASELINE_QUEUE}`;
    for (const id of [1, 2]) {
      await redis.hset(`${queue}:${id}`, 'name', 'followup', 'data', snapshot);
      await redis.zadd(`${queue}:completed`, 1, String(id));
    }
    expect(await baselineRetained(redis, ns, 2)).toMatch(
      /^baseline \d+ B: the completed BullMQ job, the prompt in its data, \d+ B \(hashtable\)/,
    );
  });
});
