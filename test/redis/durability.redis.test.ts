import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { markWrite, NotDurableError, waitForDisk } from '../../src/redis/disk-wait.js';
import { parseDurability } from '../../src/config/durability.js';
import {
  assessDurability,
  assessor,
  probeServer,
  type ServerFacts,
} from '../../src/redis/durability.js';
import { createProducer } from '../../src/producer/index.js';
import { shardOf } from '../../src/redis/keys.js';
import { NotDurableError as ExportedNotDurable } from '../../src/index.js';
import {
  startPrivateRedis,
  type PersistenceOptions,
  type PrivateRedis,
} from '../support/redis-server.js';

const FSYNC = { mode: 'fsync', replicas: 0, strict: false } as const;

describe('REDIS_DURABILITY', () => {
  it('parses fsync, replicas:N, none, and the strict form', () => {
    expect(parseDurability('fsync')).toEqual(FSYNC);
    expect(parseDurability('fsync!')).toEqual({ ...FSYNC, strict: true });
    expect(parseDurability('replicas:2')).toEqual({ ...FSYNC, replicas: 2 });
    expect(parseDurability('replicas:1!')).toEqual({ mode: 'fsync', replicas: 1, strict: true });
    expect(parseDurability(' NONE ')).toEqual({ mode: 'none' });
    for (const bad of ['', 'always', 'replicas:', 'replicas:x', 'none!', 'fsync!!'])
      expect(parseDurability(bad), bad).toBeUndefined();
  });

  it('decides from the server: WAITAOF, appendfsync always, or a warning naming the setting', () => {
    const facts = (f: Partial<ServerFacts>): ServerFacts => ({
      server: 'redis 7.0.15',
      waitaof: false,
      appendonly: 'yes',
      appendfsync: 'everysec',
      connectedReplicas: 0,
      ...f,
    });
    expect(assessDurability(FSYNC, facts({ server: 'valkey 8.0.1', waitaof: true }))).toEqual({
      mode: 'waitaof',
      replicas: 0,
      strict: false,
      warning: undefined,
    });
    expect(assessDurability(FSYNC, facts({ appendfsync: 'always' })).mode).toBe(
      'appendfsync-always',
    );
    const everysec = assessDurability(FSYNC, facts({}));
    expect(everysec.mode).toBe('at-risk');
    expect(everysec.warning).toMatch(
      /appendfsync everysec: a Redis crash can lose acknowledged writes/,
    );
    const aofOff = assessDurability(FSYNC, facts({ waitaof: true, appendonly: 'no' }));
    expect(aofOff.mode).toBe('at-risk');
    expect(aofOff.warning).toMatch(/appendonly no/);
    expect(assessDurability({ mode: 'none' }, facts({ appendonly: 'no' }))).toEqual({
      mode: 'none',
      replicas: 0,
      warning: undefined,
    });
    const noReplica = assessDurability(
      { ...FSYNC, replicas: 1 },
      facts({ waitaof: true, server: 'valkey 8.0.1' }),
    );
    expect(noReplica.mode).toBe('waitaof');
    expect(noReplica.warning).toMatch(/asks for 1 replica\(s\) but valkey 8.0.1 has 0 connected/);
    const unknown = assessDurability(FSYNC, facts({ appendfsync: 'unknown' }));
    expect(unknown.warning).toMatch(/CONFIG GET refused/);
  });
});

describe('durability on real servers', () => {
  const servers: PrivateRedis[] = [];
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    for (const s of servers) await s.destroy();
  });
  async function server(binary: string, persistence: PersistenceOptions = {}): Promise<Redis> {
    const started = await startPrivateRedis(binary, persistence);
    servers.push(started);
    const client = new Redis(started.url, { maxRetriesPerRequest: 1 });
    clients.push(client);
    return client;
  }

  it('Redis 7.0 with appendfsync everysec: no WAITAOF, a warning naming appendfsync', async () => {
    const facts = await probeServer(await server('redis-server'));
    expect(facts).toMatchObject({ waitaof: false, appendonly: 'yes', appendfsync: 'everysec' });
    expect(facts.server).toMatch(/^redis 7\.0\./);
    const assessed = assessDurability(FSYNC, facts);
    expect(assessed.mode).toBe('at-risk');
    expect(assessed.warning).toContain('appendfsync everysec');
  });

  it("a store's assessor probes once while it answers, and again after a probe failed", async () => {
    const started = await startPrivateRedis('redis-server');
    servers.push(started);
    const client = new Redis(started.url, { maxRetriesPerRequest: 0, lazyConnect: true });
    clients.push(client);
    // A URL of its own: the process-wide cache of assessOnce holds nothing for it yet.
    const assess = assessor(`${started.url}/assessor`, FSYNC, client);
    client.disconnect();
    const failed = assess();
    await expect(failed).rejects.toThrow();
    await client.connect();
    const first = assess();
    expect(first).not.toBe(failed);
    expect((await first).mode).toBe('at-risk');
    expect(assess()).toBe(first);
  });

  it('Redis 7.0 with appendfsync always keeps the promise without WAITAOF', async () => {
    const facts = await probeServer(await server('redis-server', { appendfsync: 'always' }));
    expect(assessDurability(FSYNC, facts).mode).toBe('appendfsync-always');
  });

  it('a server with AOF off is at risk whatever its version, naming appendonly', async () => {
    const facts = await probeServer(await server('valkey-server', { appendonly: 'no' }));
    expect(facts).toMatchObject({ waitaof: true, appendonly: 'no' });
    expect(assessDurability(FSYNC, facts).warning).toContain('appendonly no');
  });

  it('Valkey: waits for the local fsync, and for the replicas there are unless strict', async () => {
    const valkey = await server('valkey-server');
    const facts = await probeServer(valkey);
    expect(facts.server).toMatch(/^valkey 8\./);
    const assessed = assessDurability(FSYNC, facts);
    expect(assessed).toMatchObject({ mode: 'waitaof', replicas: 0 });
    const mark = await markWrite(valkey, 'k');
    await valkey.set('k', 'v');
    await expect(waitForDisk(mark, assessed, 1_000)).resolves.toBeUndefined();
    // A master without its replica (promoted in a failover) keeps writing, fsynced locally...
    await expect(
      waitForDisk(mark, { mode: 'waitaof', replicas: 1, strict: false }, 1_000),
    ).resolves.toBeUndefined();
    // ...unless the setting is strict: then the missing copy refuses the write.
    const oneReplica = { mode: 'waitaof', replicas: 1, strict: true } as const;
    const started = Date.now();
    await expect(waitForDisk(mark, oneReplica, 200)).rejects.toBeInstanceOf(NotDurableError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    // Nothing is asked of a server where the service does not wait.
    await expect(
      waitForDisk(mark, { mode: 'appendfsync-always', replicas: 0 }, 1),
    ).resolves.toBeUndefined();
  });

  /** WAITAOF calls the server has run so far. */
  async function waitaofCalls(redis: Redis): Promise<number> {
    const stats = String(await redis.info('commandstats'));
    return Number(/^cmdstat_waitaof:calls=(\d+)/m.exec(stats)?.[1] ?? 0);
  }

  it('the producer answers only after WAITAOF, once per call, with the copies there are', async () => {
    const valkey = await server('valkey-server');
    const url = `redis://127.0.0.1:${valkey.options.port}`;
    const producer = createProducer({ redisUrl: url, prefix: 'dur' });
    try {
      const before = await waitaofCalls(valkey);
      await producer.send({ projectId: 'p', jobId: 'j', prompt: 'one' });
      await producer.sendMany([
        { projectId: 'p', jobId: 'j', prompt: 'two' },
        { projectId: 'p', jobId: 'j', prompt: 'three' },
      ]);
      expect((await waitaofCalls(valkey)) - before).toBe(2);
    } finally {
      await producer.close();
    }
    const replicated = createProducer({
      redisUrl: url,
      prefix: 'dur',
      durability: { mode: 'fsync', replicas: 1, strict: false },
      durabilityTimeoutMs: 200,
    });
    try {
      // No replica to wait for: the write is fsynced on the one copy there is, and accepted.
      const before = await waitaofCalls(valkey);
      await replicated.send({ projectId: 'p', jobId: 'j', prompt: 'four', key: 'four' });
      expect((await waitaofCalls(valkey)) - before).toBe(1);
    } finally {
      await replicated.close();
    }
  });

  it('a strict setting refuses sends where the server cannot keep the promise, enqueuing nothing', async () => {
    const redis = await server('redis-server');
    const url = `redis://127.0.0.1:${redis.options.port}`;
    const strict = createProducer({
      redisUrl: url,
      prefix: 'strict',
      durability: { mode: 'fsync', replicas: 0, strict: true },
    });
    try {
      const error = await strict
        .send({ projectId: 'p', jobId: 'j', prompt: 'x' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ExportedNotDurable);
      expect(String(error)).toMatch(/REDIS_DURABILITY is strict.*appendfsync everysec/);
      // BullMQ writes its queue's meta when it connects; no record, lane or job was written.
      expect((await redis.keys('strict:*')).filter((k) => k !== 'strict:dispatch:meta')).toEqual(
        [],
      );
    } finally {
      await strict.close();
    }
  });

  it('a strict setting refuses before anything else, even a key taken in another shard', async () => {
    const redis = await server('redis-server');
    const url = `redis://127.0.0.1:${redis.options.port}`;
    const options = { redisUrl: url, prefix: 'strict-shards', shards: 2 };
    const lax = createProducer(options);
    const strict = createProducer({
      ...options,
      durability: { mode: 'fsync', replicas: 0, strict: true },
    });
    try {
      // Two projects of different shards, found by the shard function itself.
      const names = Array.from({ length: 16 }, (_, i) => `p${i}`);
      const home = names.find((p) => shardOf(p, 2) === 0) ?? '';
      const other = names.find((p) => shardOf(p, 2) === 1) ?? '';
      expect([shardOf(home, 2), shardOf(other, 2)]).toEqual([0, 1]);
      await lax.send({ projectId: home, jobId: 'j', prompt: 'x', key: 'k' });
      // The key is held in the other shard: refused as a conflict, but only once the server
      // could keep the send at all, which it cannot.
      const error = await strict
        .send({ projectId: other, jobId: 'j', prompt: 'x', key: 'k' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ExportedNotDurable);
    } finally {
      await Promise.all([lax.close(), strict.close()]);
    }
  });
});
