import { ReplyError } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  AgentDispatchError,
  createAdmin,
  createProducer,
  InvalidControlError,
  RedisCommandError,
  RedisUnavailableError,
} from '../../src/index.js';
import { keysFor, shardLayout } from '../../src/redis/keys.js';
import { expectNoLeakedHandles, startTestServer } from '../http/fixture.js';
import { createNamespace } from '../support/namespace.js';
import { usePrivateRedis } from '../support/redis-server.js';

const TOKEN = 'redis-errors-token-0123456789';

afterAll(() => expectNoLeakedHandles());

/**
 * Every failure of the library is an `AgentDispatchError` with a code (contract, section 4): a
 * Redis reply outside the "not now" list included, with Redis's error kept as `cause`.
 */
describe('Redis failures at the library boundary', () => {
  const served = usePrivateRedis();

  it('a full server (maxmemory 1) rejects send and pauseProject with RedisUnavailableError, its cause kept', async () => {
    const ns = createNamespace('oom', served().server.url);
    const producer = createProducer({
      redisUrl: ns.redisUrl,
      prefix: ns.prefix,
      eventsStream: ns.eventsStream,
    });
    const admin = createAdmin({
      redisUrl: ns.redisUrl,
      prefix: ns.prefix,
      eventsStream: ns.eventsStream,
    });
    try {
      await producer.send({ projectId: 'p', jobId: 'j', prompt: 'first' });
      await served().redis.config('SET', 'maxmemory', '1');
      const sent = await producer
        .send({ projectId: 'p', jobId: 'j', prompt: 'second' })
        .catch((e: unknown) => e);
      expect(sent).toBeInstanceOf(RedisUnavailableError);
      expect(sent).toMatchObject({ code: 'redis_unavailable' });
      expect((sent as Error).cause).toBeInstanceOf(ReplyError);
      const paused = await admin.pauseProject('p').catch((e: unknown) => e);
      expect(paused).toBeInstanceOf(RedisUnavailableError);
      expect(String((paused as Error).cause)).toMatch(/OOM/);
    } finally {
      await served().redis.config('SET', 'maxmemory', '0');
      await producer.close();
      await admin.close();
      await ns.cleanup();
    }
  });

  it('a reply that is no "not now" (WRONGTYPE) is a RedisCommandError, code redis_error', async () => {
    const ns = createNamespace('wrongtype', served().server.url);
    const admin = createAdmin({
      redisUrl: ns.redisUrl,
      prefix: ns.prefix,
      eventsStream: ns.eventsStream,
    });
    try {
      const [shard] = shardLayout(ns.prefix, ns.eventsStream, 1, false);
      await ns.redis.set(keysFor(shard?.prefix ?? '').projectControls('p'), 'not a hash');
      const err = await admin.pauseProject('p').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisCommandError);
      expect(err).toBeInstanceOf(AgentDispatchError);
      expect(err).toMatchObject({ code: 'redis_error' });
      expect(String((err as Error).cause)).toMatch(/WRONGTYPE/);
    } finally {
      await admin.close();
      await ns.cleanup();
    }
  });

  it('over HTTP a full server is a 503 with code redis_unavailable, a refused command a 503 with redis_error', async () => {
    const ns = createNamespace('oom-http', served().server.url);
    const app = await startTestServer(ns.config({ INTAKE_TOKEN: TOKEN, OPERATOR_TOKEN: TOKEN }), {
      withProducer: true,
    });
    const post = (path: string, body?: object) =>
      fetch(`${app.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    try {
      const first = await post('/v1/followups', { projectId: 'p', jobId: 'j', prompt: 'one' });
      expect(first.status).toBe(202);
      const [shard] = shardLayout(ns.prefix, ns.eventsStream, 1, false);
      await ns.redis.set(keysFor(shard?.prefix ?? '').projectControls('q'), 'not a hash');
      const refused = await post('/v1/projects/q/pause');
      expect([refused.status, ((await refused.json()) as { code?: string }).code]).toEqual([
        503,
        'redis_error',
      ]);
      await served().redis.config('SET', 'maxmemory', '1');
      const full = await post('/v1/followups', { projectId: 'p', jobId: 'j', prompt: 'two' });
      expect([full.status, ((await full.json()) as { code?: string }).code]).toEqual([
        503,
        'redis_unavailable',
      ]);
      const pause = await post('/v1/projects/p/pause');
      expect([pause.status, ((await pause.json()) as { code?: string }).code]).toEqual([
        503,
        'redis_unavailable',
      ]);
    } finally {
      await served().redis.config('SET', 'maxmemory', '0');
      await app.close();
      await ns.cleanup();
    }
  });
});

describe('createAdmin options', () => {
  it('refuses a sendRateLimit that is no rate with InvalidControlError naming it', () => {
    const err = (() => {
      try {
        return createAdmin({ redisUrl: 'redis://127.0.0.1:1', sendRateLimit: 'lots' });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(InvalidControlError);
    expect(err).toMatchObject({ code: 'invalid_control', field: 'sendRateLimit' });
  });
});
