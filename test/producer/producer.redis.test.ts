import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { META_MAX_DEPTH } from '../../src/dispatch/followup.js';
import { DispatchStore } from '../../src/store/store.js';
import {
  createProducer,
  IdempotencyConflictError,
  InvalidFollowUpError,
  RedisUnavailableError,
} from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { recordShardCount } from '../../src/redis/layout.js';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { useOpened } from '../support/hooks.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { startPrivateRedis } from '../support/redis-server.js';
import { laneIds } from '../support/where-is.js';

/** A follow-up with an idempotency key, sent again (or changed) by the key tests. */
const ORDER_1 = { projectId: 'p', jobId: 'j', prompt: 'a', key: 'order-1' } as const;

describe('createProducer', () => {
  const ns = useNamespace('producer');
  const producer = useOpened('producer', () =>
    createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix, promptMaxBytes: 1024 }),
  );
  const queue = useOpened(
    'queue',
    () =>
      new Queue(QUEUE_NAMES.dispatch, { connection: ns().redis.duplicate(), prefix: ns().prefix }),
  );

  /** The lane of agent job p/j, its head first. */
  const lane = () => laneIds(ns().redis, ns().prefix, 'p', 'j');

  async function enqueuedKeys(): Promise<string[]> {
    return (await ns().redis.keys(`${ns().prefix}:*`)).filter((k) => !k.endsWith(':meta'));
  }

  it('enqueues a follow-up and reports its state', async () => {
    const { dispatchId, deduplicated } = await producer().send({
      projectId: 'p',
      jobId: 'j',
      prompt: 'hello',
      meta: { ticket: 7 },
    });
    expect(deduplicated).toBe(false);
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 1 });
    expect(await producer().status(dispatchId)).toMatchObject({
      dispatchId,
      projectId: 'p',
      jobId: 'j',
      state: 'queued',
      meta: { ticket: 7 },
      attempts: 0,
    });
    expect(await producer().status('no-such-dispatch')).toBeNull();
  });

  it("adds a job under the dispatch id whose options are attempts and backoff: retention is the worker's", async () => {
    const { dispatchId } = await producer().send({ projectId: 'p', jobId: 'j', prompt: 'hello' });
    const job = await queue().getJob(dispatchId);
    expect(job?.id).toBe(dispatchId);
    expect(job?.opts).toMatchObject({ backoff: { type: 'exponential' } });
    // The id is not stored again among the options.
    expect(job?.opts).not.toHaveProperty('jobId');
    expect(job?.opts.attempts).toBeGreaterThan(0);
    expect(job?.opts).not.toHaveProperty('removeOnComplete');
    expect(job?.opts).not.toHaveProperty('removeOnFail');
  });

  it('returns the first dispatch for a repeated key with the same content, enqueuing nothing more', async () => {
    const first = await producer().send({ ...ORDER_1, meta: { a: 1, b: [1, 2] } });
    // The same content, its meta keys in another order: the same follow-up.
    const again = await producer().send({ ...ORDER_1, meta: { b: [1, 2], a: 1 } });
    const [inBatch, other] = await producer().sendMany([
      { projectId: 'p', jobId: 'j', prompt: 'a', key: 'order-1', meta: { a: 1, b: [1, 2] } },
      { projectId: 'p', jobId: 'j', prompt: 'b', key: 'order-2' },
    ]);
    expect(again).toEqual({ dispatchId: first.dispatchId, deduplicated: true });
    expect(inBatch).toEqual({ dispatchId: first.dispatchId, deduplicated: true });
    expect(other?.deduplicated).toBe(false);
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 2 });
    expect(await lane()).toHaveLength(2);
  });

  it('refuses a repeated key with different content: IdempotencyConflictError naming key', async () => {
    const first = await producer().send(ORDER_1);
    const variants = [
      { projectId: 'p', jobId: 'j', prompt: 'different text', key: 'order-1' },
      { projectId: 'p', jobId: 'j2', prompt: 'a', key: 'order-1' },
      { projectId: 'p', jobId: 'j', prompt: 'a', key: 'order-1', meta: { n: 1 } },
    ];
    for (const variant of variants) {
      const error = await producer()
        .send(variant)
        .catch((e: unknown) => e);
      expect(error, JSON.stringify(variant)).toBeInstanceOf(IdempotencyConflictError);
      expect(error).toMatchObject({
        code: 'idempotency_conflict',
        field: 'key',
        conflicts: [{ key: 'order-1', dispatchId: first.dispatchId }],
        results: [null],
      });
      expect((error as Error).message).toContain('key');
    }
    // The first follow-up is kept as it was; nothing else was enqueued.
    expect(await ns().redis.get(`${ns().prefix}:prompt:${first.dispatchId}`)).toBe('a');
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 1 });
    expect(await lane()).toHaveLength(1);
  });

  it('in a batch, reports the conflicting index and the results of the others, which are enqueued', async () => {
    const first = await producer().send(ORDER_1);
    const error = (await producer()
      .sendMany([
        { projectId: 'p', jobId: 'j', prompt: 'new', key: 'order-2' },
        { projectId: 'p', jobId: 'j', prompt: 'changed', key: 'order-1' },
        { projectId: 'p', jobId: 'j', prompt: 'a', key: 'order-1' },
        { projectId: 'p', jobId: 'j', prompt: 'no key' },
      ])
      .catch((e: unknown) => e)) as IdempotencyConflictError;
    expect(error).toBeInstanceOf(IdempotencyConflictError);
    expect(error.conflicts).toEqual([{ index: 1, key: 'order-1', dispatchId: first.dispatchId }]);
    expect(error.results).toEqual([
      { dispatchId: expect.any(String), deduplicated: false },
      null,
      { dispatchId: first.dispatchId, deduplicated: true },
      { dispatchId: expect.any(String), deduplicated: false },
    ]);
    expect(error.message).toContain('[1] key');
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 3 });
    expect(await lane()).toEqual([
      first.dispatchId,
      error.results[0]?.dispatchId,
      error.results[3]?.dispatchId,
    ]);
  });

  it('still detects a conflict after the follow-up ended and its prompt was deleted', async () => {
    const followUp = { projectId: 'p', jobId: 'j', prompt: 'a', key: 'order-9' };
    const { dispatchId } = await producer().send(followUp);
    const store = new DispatchStore(ns().redis, keysFor(ns().prefix), {
      eventsStream: ns().eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
    });
    const record = await store.sends.get(dispatchId);
    if (!record) throw new Error('no record');
    const { finished } = await store.finish(record, {
      type: EVENT_TYPES.undeliverable,
      reason: 'bad_request',
    });
    expect(finished).toBe(true);
    expect(await ns().redis.hexists(`${ns().prefix}:d:${dispatchId}`, 'prompt')).toBe(0);
    expect(await producer().send(followUp)).toEqual({ dispatchId, deduplicated: true });
    const error = await producer()
      .send({ ...followUp, prompt: 'b' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyConflictError);
  });

  it('rejects a meta nested 1,500 levels deep naming meta, without overflowing the stack', async () => {
    const deep = (depth: number, open: string, close: string) =>
      JSON.parse(`{"x":${open.repeat(depth)}1${close.repeat(depth)}}`) as Record<string, unknown>;
    // 3 KB of arrays, and the same depth of objects: both used to overflow inside zod.
    for (const meta of [deep(1500, '[', ']'), deep(1500, '{"a":', '}'), deep(20_000, '[', ']')]) {
      const error = await producer()
        .send({ projectId: 'p', jobId: 'j', prompt: 'x', meta })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidFollowUpError);
      expect((error as InvalidFollowUpError).field).toBe('meta');
      expect((error as InvalidFollowUpError).message).toContain(`${META_MAX_DEPTH} levels`);
    }
    // 32 levels is allowed.
    const ok = await producer().send({
      projectId: 'p',
      jobId: 'j',
      prompt: 'x',
      meta: deep(META_MAX_DEPTH - 1, '[', ']'),
    });
    expect(ok.deduplicated).toBe(false);
  });

  it('reports any error raised while validating as InvalidFollowUpError, never as a crash', async () => {
    const meta = {};
    Object.defineProperty(meta, 'boom', {
      enumerable: true,
      get() {
        throw new Error('getter exploded');
      },
    });
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic['self'] = cyclic;
    for (const bad of [meta, cyclic]) {
      const error = await producer()
        .send({ projectId: 'p', jobId: 'j', prompt: 'x', meta: bad })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidFollowUpError);
      expect((error as InvalidFollowUpError).field).toBe('meta');
    }
    expect(await enqueuedKeys()).toEqual([]);
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
    const error = await producer()
      .send(input as never)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidFollowUpError);
    expect((error as InvalidFollowUpError).field).toBe(field);
    expect((error as InvalidFollowUpError).message).toContain(field);
    expect(await enqueuedKeys()).toEqual([]);
  });

  it('rejects a whole batch with one bad item, naming its index and field', async () => {
    const error = (await producer()
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
    // A server of its own: MONITOR then sees this producer() alone (other test files' connections
    // on the shared server made ioredis take a monitored line for a reply, now and then).
    const server = await startPrivateRedis();
    const connection = new Redis(server.url, { enableOfflineQueue: false });
    const own = createProducer({ redisUrl: server.url, prefix: ns().prefix, connection });
    const monitor = new Redis(server.url);
    const countedConnection = new Redis(server.url);
    const counted = new Queue(QUEUE_NAMES.dispatch, {
      connection: countedConnection,
      prefix: ns().prefix,
    });
    try {
      // As a fleet's first role does: a producer on a layout no role recorded checks for the
      // record on every call (an EXISTS), since the fleet may record another count at its start.
      await recordShardCount(countedConnection, ns().prefix, 1);
      await own.send({ projectId: 'p', jobId: 'warm-up', prompt: 'x' });
      const address = /\baddr=(\S+)/.exec(String(await connection.client('INFO')))?.[1];
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
      expect(results).toHaveLength(100);
      // MONITOR lists the commands queued in a transaction when EXEC runs them, so what this
      // connection sent is MULTI, one SCRIPT LOAD (REGISTER, so a flushed script cache cannot
      // leave a job without its record; BullMQ's 20 KB add was loaded by the first send and
      // script-cache.redis.test.ts covers its NOSCRIPT), one EVALSHA of REGISTER for the whole
      // batch, 100 of the job add, EXEC.
      expect(seen.filter((c) => c === 'multi')).toHaveLength(1);
      expect(seen.filter((c) => c === 'exec')).toHaveLength(1);
      expect(seen.filter((c) => c === 'script')).toHaveLength(1);
      expect(seen.filter((c) => c === 'evalsha')).toHaveLength(101);
      expect(seen.filter((c) => !['multi', 'exec', 'script', 'evalsha'].includes(c))).toEqual([]);
      expect(await counted.getJobCounts('wait')).toEqual({ wait: 101 });
    } finally {
      monitor.disconnect();
      await own.close();
      connection.disconnect();
      await counted.close();
      countedConnection.disconnect();
      await server.destroy();
    }
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
