import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createProducer,
  InvalidFollowUpError,
  RedisUnavailableError,
  type Producer,
} from '../../src/producer/index.js';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { createNamespace, eventually, type Namespace } from '../support/namespace.js';

describe('createProducer', () => {
  let ns: Namespace;
  let producer: Producer;
  let queue: Queue;

  beforeEach(() => {
    ns = createNamespace('producer');
    producer = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix, promptMaxBytes: 1024 });
    queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
  });
  afterEach(async () => {
    await producer.close();
    await queue.close();
    await ns.cleanup();
  });

  async function enqueuedKeys(): Promise<string[]> {
    return (await ns.redis.keys(`${ns.prefix}:*`)).filter((k) => !k.endsWith(':meta'));
  }

  it('enqueues a follow-up and reports its state', async () => {
    const { dispatchId, deduplicated } = await producer.send({
      projectId: 'p',
      jobId: 'j',
      prompt: 'hello',
      meta: { ticket: 7 },
    });
    expect(deduplicated).toBe(false);
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
    expect(await producer.status(dispatchId)).toMatchObject({
      dispatchId,
      projectId: 'p',
      jobId: 'j',
      state: 'queued',
      meta: { ticket: 7 },
      attempts: 0,
    });
    expect(await producer.status('no-such-dispatch')).toBeNull();
  });

  it('returns the first dispatch for a repeated key and enqueues nothing more', async () => {
    const first = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'a', key: 'order-1' });
    const again = await producer.send({
      projectId: 'p',
      jobId: 'j',
      prompt: 'different text',
      key: 'order-1',
    });
    const [inBatch, other] = await producer.sendMany([
      { projectId: 'p', jobId: 'j', prompt: 'a', key: 'order-1' },
      { projectId: 'p', jobId: 'j', prompt: 'b', key: 'order-2' },
    ]);
    expect(again).toEqual({ dispatchId: first.dispatchId, deduplicated: true });
    expect(inBatch).toEqual({ dispatchId: first.dispatchId, deduplicated: true });
    expect(other?.deduplicated).toBe(false);
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 2 });
    expect(await ns.redis.llen(`${ns.prefix}:lane:1.p:j`)).toBe(2);
  });

  it.each([
    [{ jobId: 'j', prompt: 'x' }, 'projectId'],
    [{ projectId: '', jobId: 'j', prompt: 'x' }, 'projectId'],
    [{ projectId: 'p\u0007', jobId: 'j', prompt: 'x' }, 'projectId'],
    [{ projectId: 'p', jobId: 'x'.repeat(201), prompt: 'x' }, 'jobId'],
    [{ projectId: 'p', jobId: 'j', prompt: '' }, 'prompt'],
    [{ projectId: 'p', jobId: 'j', prompt: 'é'.repeat(513) }, 'prompt'],
    [{ projectId: 'p', jobId: 'j', prompt: '\ud800' }, 'prompt'],
    [{ projectId: 'p', jobId: 'j', prompt: 7 }, 'prompt'],
    [{ projectId: 'p', jobId: 'j', prompt: 'x', key: '' }, 'key'],
    [{ projectId: 'p', jobId: 'j', prompt: 'x', meta: [1] }, 'meta'],
    [{ projectId: 'p', jobId: 'j', prompt: 'x', meta: { big: 'x'.repeat(5000) } }, 'meta'],
    [{ projectId: 'p', jobId: 'j', prompt: 'x', extra: 1 }, 'extra'],
    [null, '(body)'],
  ])('rejects %j naming %s, and enqueues nothing', async (input, field) => {
    const error = await producer.send(input as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidFollowUpError);
    expect((error as InvalidFollowUpError).field).toBe(field);
    expect((error as InvalidFollowUpError).message).toContain(field);
    expect(await enqueuedKeys()).toEqual([]);
  });

  it('rejects a whole batch with one bad item, naming its index and field', async () => {
    const error = (await producer
      .sendMany([
        { projectId: 'p', jobId: 'j', prompt: 'fine' },
        { projectId: 'p', jobId: 'j', prompt: '' },
      ])
      .catch((e: unknown) => e)) as InvalidFollowUpError;
    expect(error).toBeInstanceOf(InvalidFollowUpError);
    expect(error.problems).toEqual([{ index: 1, field: 'prompt', message: 'must not be empty' }]);
    expect(await enqueuedKeys()).toEqual([]);
  });

  it('enqueues a batch of 100 in one MULTI/EXEC round trip', async () => {
    // A producer on a connection of its own, so MONITOR can tell its commands from other tests'.
    const connection = new Redis(ns.redisUrl, { enableOfflineQueue: false });
    const own = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix, connection });
    await own.send({ projectId: 'p', jobId: 'warm-up', prompt: 'x' });
    const address = /\baddr=(\S+)/.exec(String(await connection.client('INFO')))?.[1];
    const monitor = new Redis(ns.redisUrl);
    const seen: string[] = [];
    const feed = await monitor.monitor();
    feed.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === address) seen.push(String(args[0]).toLowerCase());
    });
    const batch = Array.from({ length: 100 }, (_, i) => ({
      projectId: 'p',
      jobId: `j${i % 7}`,
      prompt: `#${i}`,
    }));
    const results = await own.sendMany(batch);
    await eventually(() => (seen.includes('exec') ? true : undefined), { what: 'EXEC' });
    feed.disconnect();
    monitor.disconnect();
    await own.close();
    connection.disconnect();
    expect(results).toHaveLength(100);
    // MONITOR lists the commands queued in a transaction when EXEC runs them, so what this
    // connection sent is MULTI, 100 EVALs (register) and 100 EVALSHAs (BullMQ's add), EXEC.
    expect(seen.filter((c) => c === 'multi')).toHaveLength(1);
    expect(seen.filter((c) => c === 'exec')).toHaveLength(1);
    expect(seen.filter((c) => c === 'eval')).toHaveLength(100);
    expect(seen.filter((c) => !['multi', 'exec', 'eval', 'evalsha'].includes(c))).toEqual([]);
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 101 });
  });
});

describe('createProducer without Redis', () => {
  it('fails fast, naming Redis, instead of waiting forever', async () => {
    const { freePort } = await import('../support/redis-server.js');
    const producer = createProducer({
      redisUrl: `redis://127.0.0.1:${await freePort()}`,
      readyTimeoutMs: 300,
    });
    try {
      const started = Date.now();
      const error = await producer
        .send({ projectId: 'p', jobId: 'j', prompt: 'x' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect(Date.now() - started).toBeLessThan(5_000);
      await expect(producer.status('d')).rejects.toBeInstanceOf(RedisUnavailableError);
    } finally {
      await producer.close();
    }
  });
});
