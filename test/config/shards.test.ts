import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { shardLayout, shardOf } from '../../src/redis/keys.js';
import { keySlot, SLOTS } from '../../src/redis/slot.js';

const base = { REDIS_URL: 'redis://127.0.0.1:6379', AGENT_API_KEY: 'k' };

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig({ ...base, ...env });
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map((p) => `${p.setting}: ${p.message}`);
  }
}

describe('shard settings', () => {
  it('default to one shard, served whole, on a single Redis', () => {
    const config = loadConfig(base);
    expect([config.redisCluster, config.shardCount, config.servedShards]).toEqual([false, 1, [0]]);
  });

  it('parse SHARDS as ranges and lists, and name each bad value', () => {
    expect(loadConfig({ ...base, DISPATCH_SHARDS: '8', SHARDS: '0-2,5,2' }).servedShards).toEqual([
      0, 1, 2, 5,
    ]);
    expect(problemsOf({ DISPATCH_SHARDS: '6', SHARDS: '4-7' })).toEqual([
      'SHARDS: shard 6, 7 does not exist: DISPATCH_SHARDS=6 numbers them 0 to 5',
    ]);
    expect(problemsOf({ SHARDS: 'two' })[0]).toMatch(/^SHARDS: expected shards such as 0-3/);
    expect(problemsOf({ DISPATCH_SHARDS: '0' })[0]).toMatch(/^DISPATCH_SHARDS: expected a whole/);
  });

  it('take REDIS_CLUSTER with any durability: WAITAOF goes to the master of each shard', () => {
    expect(problemsOf({ REDIS_CLUSTER: 'true' })).toEqual([]);
    expect(problemsOf({ REDIS_CLUSTER: 'true', REDIS_DURABILITY: 'fsync!' })).toEqual([]);
    expect(problemsOf({ REDIS_CLUSTER: 'true', REDIS_DURABILITY: 'none' })).toEqual([]);
  });
});

describe('the shard layout', () => {
  it('keeps the names of today with one shard on a single Redis', () => {
    expect(shardLayout('agent-dispatch', 'agent-dispatch:events', 1, false)).toEqual([
      { index: 0, prefix: 'agent-dispatch', eventsStream: 'agent-dispatch:events' },
    ]);
  });

  it('gives each shard one hash tag for its keys and its stream, in its share of the slots', () => {
    const shards = shardLayout('{agent-dispatch}', 'agent-dispatch:events', 6, true);
    for (const { index, prefix, eventsStream } of shards) {
      expect(prefix).toMatch(new RegExp(`^\\{agent-dispatch:${index}(\\.\\d+)?\\}$`));
      expect(eventsStream).toBe(`agent-dispatch:events:${prefix}`);
      expect(keySlot(`${prefix}:d:some-id`)).toBe(keySlot(eventsStream));
      const slot = keySlot(prefix);
      expect(slot).toBeGreaterThanOrEqual(Math.floor((index * SLOTS) / 6));
      expect(slot).toBeLessThan(Math.floor(((index + 1) * SLOTS) / 6));
    }
  });

  it('computes the slots Redis computes', () => {
    // The examples of the Redis Cluster specification, and what CLUSTER KEYSLOT answered.
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(3443);
    expect(keySlot('{}x')).toBe(10595);
    expect(keySlot('héllo')).toBe(11061);
  });

  it('maps a project to the same shard everywhere', () => {
    expect([shardOf('docs-site', 6), shardOf('docs-site', 6), shardOf('docs-site', 1)]).toEqual([
      shardOf('docs-site', 6),
      shardOf('docs-site', 6),
      0,
    ]);
    const counts = new Array<number>(6).fill(0);
    for (let p = 0; p < 6000; p++) counts[shardOf(`project-${p}`, 6)]! += 1;
    for (const c of counts) expect(Math.abs(c / 1000 - 1)).toBeLessThan(0.1);
  });
});

describe('ORG_RATE_LIMIT over shards', () => {
  it('is off by default, split evenly over the shards (the remainder to the first), at least one each', async () => {
    const { orgShare } = await import('../../src/config/index.js');
    expect(loadConfig(base).orgRateLimit).toBeUndefined();
    const org = loadConfig({ ...base, DISPATCH_SHARDS: '3', ORG_RATE_LIMIT: '10/1m' }).orgRateLimit;
    const shares = [0, 1, 2].map((i) => orgShare(org, i, 3));
    expect(shares.map((s) => s?.max)).toEqual([4, 3, 3]);
    expect(shares.every((s) => s?.windowMs === 60_000)).toBe(true);
    expect(problemsOf({ DISPATCH_SHARDS: '4', ORG_RATE_LIMIT: '3/1s' })).toEqual([
      'ORG_RATE_LIMIT: 3 per window cannot be split over DISPATCH_SHARDS=4 shards: it must be at least 4',
    ]);
  });
});
