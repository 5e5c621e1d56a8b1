import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  LISTPACK_VALUE_BYTES,
  startEmbeddedRedis,
  type EmbeddedRedis,
} from '../../src/cli/embedded-redis.js';
import { RedisServerMissingError } from '../../src/cli/server-binary.js';
import { createLogger } from '../../src/telemetry/logger.js';

const logger = createLogger('silent');

describe("start's private Redis", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-embedded-'));
    dirs.push(dir);
    return dir;
  };

  /** Runs `check` against a started server, then stops it. */
  async function withServer(
    started: EmbeddedRedis,
    check: (redis: Redis) => Promise<void>,
  ): Promise<void> {
    const redis = new Redis(started.url, { maxRetriesPerRequest: 1 });
    try {
      await check(redis);
    } finally {
      redis.disconnect();
      await started.stop();
    }
  }

  it('prefers valkey-server, with appendfsync everysec and a working WAITAOF', async () => {
    const started = await startEmbeddedRedis({ dataDir: dataDir(), logger });
    expect(started.server).toMatch(/^valkey-server 8\./);
    expect(started.appendfsync).toBe('everysec');
    await withServer(started, async (redis) => {
      expect(await redis.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec']);
      expect(await redis.config('GET', 'maxmemory-policy')).toEqual([
        'maxmemory-policy',
        'noeviction',
      ]);
      expect(await redis.config('GET', 'hash-max-listpack-value')).toEqual([
        'hash-max-listpack-value',
        String(LISTPACK_VALUE_BYTES),
      ]);
      await redis.set('k', 'v');
      expect(await redis.call('WAITAOF', 1, 0, 1_000)).toEqual([1, 0]);
    });
  });

  it('runs a redis-server without WAITAOF with appendfsync always', async () => {
    const started = await startEmbeddedRedis({
      dataDir: dataDir(),
      logger,
      binary: 'redis-server',
    });
    expect(started.server).toMatch(/^redis-server 7\.0\./);
    expect(started.appendfsync).toBe('always');
    await withServer(started, async (redis) => {
      expect(await redis.config('GET', 'appendfsync')).toEqual(['appendfsync', 'always']);
      expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      // A tracked follow-up's record holds the agent job's snapshot, about 250 bytes of JSON: at
      // Redis's default limit (64 bytes a value) the hash would be a hashtable.
      const snapshot = JSON.stringify({ id: 'job_1', status: 'active', note: 'x'.repeat(230) });
      await redis.hset('record', 'state', 'sent', 'job', snapshot);
      expect(await redis.object('ENCODING', 'record')).toBe('listpack');
    });
  });

  it('names the packages to install when the binary is missing', async () => {
    const error = await startEmbeddedRedis({
      dataDir: dataDir(),
      logger,
      binary: 'no-such-redis-server',
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisServerMissingError);
    expect(String(error)).toMatch(/apt-get install valkey-server/);
  });
});
