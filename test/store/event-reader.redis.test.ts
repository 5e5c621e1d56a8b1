import { afterAll, describe, expect, it } from 'vitest';
import {
  createEventReader,
  LayoutError,
  RedisCommandError,
  RedisUnavailableError,
} from '../../src/index.js';
import { shardLayout } from '../../src/redis/keys.js';
import { recordShardCount } from '../../src/redis/layout.js';
import { expectNoLeakedHandles } from '../http/fixture.js';
import { useNamespace } from '../support/namespace.js';
import { freePort } from '../support/redis-server.js';

const SHARDS = 4;

afterAll(() => expectNoLeakedHandles());

describe('createEventReader', () => {
  const ns = useNamespace('event-reader', { shards: SHARDS });
  const common = () => ({
    redisUrl: ns().redisUrl,
    prefix: ns().prefix,
    eventsStream: ns().eventsStream,
    group: 'g',
    consumer: 'c',
  });

  it('without shards reads the events of every shard of a 4-shard fleet', async () => {
    await recordShardCount(ns().redis, ns().prefix, SHARDS);
    const streams = shardLayout(ns().prefix, ns().eventsStream, SHARDS, false);
    for (const [i, s] of streams.entries())
      await ns().redis.xadd(
        s.eventsStream,
        '*',
        'type',
        'followup.completed',
        'dispatchId',
        `d${i}`,
      );
    const reader = createEventReader(common());
    try {
      const events = await reader.read();
      expect(events.map((e) => [e.shard, e.dispatchId]).sort()).toEqual(
        streams.map((_, i) => [i, `d${i}`]),
      );
      await reader.ack(events);
    } finally {
      await reader.close();
    }
  });

  it('refuses a shards option that differs from the fleet record with LayoutError', async () => {
    await recordShardCount(ns().redis, ns().prefix, SHARDS);
    const reader = createEventReader({ ...common(), shards: 2 });
    try {
      const err = await reader.read().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LayoutError);
    } finally {
      await reader.close();
    }
  });

  it('wraps a Redis reply it cannot use (a stream key holding a string) as RedisCommandError', async () => {
    const [first] = shardLayout(ns().prefix, ns().eventsStream, 1, false);
    await ns().redis.set(first?.eventsStream ?? '', 'not a stream');
    const reader = createEventReader({ ...common(), shards: 1 });
    try {
      const err = await reader.read().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisCommandError);
      expect(String((err as Error).cause)).toMatch(/WRONGTYPE|key/);
    } finally {
      await reader.close();
    }
  });

  it('with Redis down, read and ack reject with RedisUnavailableError within readyTimeoutMs', async () => {
    const port = await freePort();
    const reader = createEventReader({
      ...common(),
      redisUrl: `redis://127.0.0.1:${port}`,
      readyTimeoutMs: 300,
    });
    try {
      const started = Date.now();
      const outcome = await Promise.race([
        reader.read({ blockMs: 100 }).catch((e: unknown) => e),
        new Promise((r) => setTimeout(() => r('never settled'), 5_000)),
      ]);
      expect(outcome).toBeInstanceOf(RedisUnavailableError);
      expect(Date.now() - started).toBeLessThan(2_000);
      const acked = await reader.ack([{ id: '1-0', stream: 's' }]).catch((e: unknown) => e);
      expect(acked).toBeInstanceOf(RedisUnavailableError);
    } finally {
      await reader.close();
    }
  });
});
