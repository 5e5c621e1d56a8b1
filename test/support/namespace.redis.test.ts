import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { shardLayout } from '../../src/redis/keys.js';
import { useNamespace, withNamespace, type Namespace } from './namespace.js';

const SHARDS = 3;

/** The keys under `pattern` on the shared test Redis. */
async function keysOf(pattern: string): Promise<string[]> {
  const redis = new Redis(inject('redisUrl'));
  try {
    return await redis.keys(pattern);
  } finally {
    redis.disconnect();
  }
}

describe('useNamespace with shards', () => {
  let seen: Namespace | undefined;
  // Registered before useNamespace: after-hooks run in reverse, so this one runs after its clean-up.
  afterAll(async () => {
    if (!seen) throw new Error('precondition: the test ran in the namespace');
    expect(await keysOf(`${seen.prefix}*`)).toEqual([]);
    for (const shard of shardLayout(seen.prefix, seen.eventsStream, SHARDS, false))
      expect(await keysOf(`${shard.prefix}*`)).toEqual([]);
  });
  const ns = useNamespace('ns-shards', { scope: 'all', shards: SHARDS });

  it('deletes the keys of the namespace and of each shard after the describe', async () => {
    seen = ns();
    const shards = shardLayout(ns().prefix, ns().eventsStream, SHARDS, false);
    await ns().redis.set(`${ns().prefix}:own`, '1');
    for (const shard of shards) await ns().redis.set(`${shard.prefix}:d:x`, '1');
    expect(await keysOf(`${ns().prefix}*`)).toHaveLength(1);
    expect(await keysOf(`${shards[2]?.prefix ?? 'none'}*`)).toHaveLength(1);
  });
});

describe('withNamespace', () => {
  it('cleans up after a test that throws, and passes the error on', async () => {
    let prefix = '';
    const failing = withNamespace('ns-throws', async (ns) => {
      prefix = ns.prefix;
      await ns.redis.set(`${ns.prefix}:k`, '1');
      throw new Error('the test failed');
    });
    await expect(failing).rejects.toThrow('the test failed');
    expect(prefix).not.toBe('');
    expect(await keysOf(`${prefix}*`)).toEqual([]);
  });
});
