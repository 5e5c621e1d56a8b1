import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { parseRedisAddress } from '../../src/config/redis-address.js';
import { runCliToEnd } from '../support/cli.js';

/** The problems `env` gives, as `SETTING: message` lines; empty when it loads. */
function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env, {}, { required: ['REDIS_URL'] });
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map((p) => `${p.setting}: ${p.message}`);
  }
}

describe('REDIS_URL as a list of seed nodes', () => {
  it('makes the deployment a cluster seeded from every node listed', () => {
    const config = loadConfig({ REDIS_URL: 'redis://:pw@10.0.0.1:7000, 10.0.0.2:7001' });
    expect(config.redisCluster).toBe(true);
    expect(parseRedisAddress(config.redisUrl ?? '')).toMatchObject({
      kind: 'cluster',
      seeds: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
      ],
    });
    expect(loadConfig({ REDIS_URL: 'redis://a:1', REDIS_CLUSTER: 'true' }).redisCluster).toBe(true);
    expect(loadConfig({ REDIS_URL: 'redis://a:1' }).redisCluster).toBe(false);
  });

  it('refuses a list with REDIS_CLUSTER=false, naming REDIS_CLUSTER', () => {
    expect(problems({ REDIS_URL: 'redis://a:1,redis://b:2', REDIS_CLUSTER: 'false' })).toEqual([
      expect.stringMatching(/^REDIS_CLUSTER: is false, but REDIS_URL lists several seed nodes/),
    ]);
  });

  it.each([
    ['redis://a:1,,redis://b:2', /seed node 2 of 3 is empty/],
    ['redis://a:1,http://b:2', /seed node 2 of 2 is not host:port/],
    ['redis://a:1,b:99999', /seed node 2 of 2 is not host:port/],
    ['redis://a:1,b', /seed node 2 of 2 is not host:port/],
    ['a:1,redis://b:2', /the first seed node is not a redis:\/\/ or rediss:\/\/ URL/],
    ['redis://:secret@a:1,redis://:secret@', /seed node 2 of 2 is not a redis/],
    ['http://a:1', /the URL is not a redis:\/\/ or rediss:\/\/ URL/],
  ])('names REDIS_URL for %j, never echoing it', (url, message) => {
    const found = problems({ REDIS_URL: url });
    expect(found).toEqual([expect.stringMatching(/^REDIS_URL: /)]);
    expect(found[0]).toMatch(message);
    expect(found[0]).not.toContain('secret');
  });
});

describe('REDIS_SENTINELS and REDIS_SENTINEL_NAME', () => {
  it('stand in for REDIS_URL', () => {
    const config = loadConfig(
      { REDIS_SENTINELS: '10.0.0.1:26379, 10.0.0.2:26380', REDIS_SENTINEL_NAME: 'main' },
      {},
      { required: ['REDIS_URL'] },
    );
    expect(config.redisCluster).toBe(false);
    expect(parseRedisAddress(config.redisUrl ?? '')).toEqual({
      kind: 'sentinel',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26380 },
      ],
      name: 'main',
    });
  });

  it.each([
    [{ REDIS_SENTINELS: 'a:26379' }, /^REDIS_SENTINEL_NAME: is required with REDIS_SENTINELS/],
    [{ REDIS_SENTINEL_NAME: 'main', REDIS_URL: 'redis://a:1' }, /^REDIS_SENTINELS: is required/],
    [
      { REDIS_SENTINELS: 'a:26379', REDIS_SENTINEL_NAME: 'm', REDIS_URL: 'redis://a:1' },
      /^REDIS_SENTINELS: set REDIS_SENTINELS or REDIS_URL, not both/,
    ],
    [
      { REDIS_SENTINELS: 'a:26379', REDIS_SENTINEL_NAME: 'm', REDIS_CLUSTER: 'true' },
      /^REDIS_CLUSTER: must be false with REDIS_SENTINELS/,
    ],
    [{ REDIS_SENTINELS: 'a:b', REDIS_SENTINEL_NAME: 'm' }, /^REDIS_SENTINELS: entry 1 of 1/],
    [{ REDIS_SENTINELS: 'a:1,', REDIS_SENTINEL_NAME: 'm' }, /^REDIS_SENTINELS: entry 2 of 2/],
    [{ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'a b' }, /^REDIS_SENTINEL_NAME: expected/],
  ])('refuses %j with one problem naming the setting', (env, message) => {
    const found = problems(env);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(message);
  });
});

describe('a role given a bad REDIS_URL list', () => {
  it('exits 2 with one line naming REDIS_URL (not 1 with "Invalid URL")', async () => {
    const { code, stdout, stderr } = await runCliToEnd(['worker'], {
      REDIS_URL: 'redis://:hunter2hunter2@127.0.0.1:7000,,127.0.0.1:7001',
      AGENT_API_KEY: 'test-key',
    });
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toEqual([expect.stringMatching(/REDIS_URL: seed node 2/)]);
    expect(stdout + stderr).not.toContain('hunter2');
  });
});
