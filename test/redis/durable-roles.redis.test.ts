import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DispatchStore, type DispatchRef } from '../../src/store/store.js';
import { createProducer } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { markWrite, NotDurableError, waitForDisk } from '../../src/redis/disk-wait.js';
import type { DurabilityAssessment } from '../../src/redis/durability.js';
import { logLines, runCli, runCliToEnd } from '../support/cli.js';
import { eventually } from '../support/namespace.js';
import {
  freePort,
  startPrivateRedis,
  usePrivateRedis,
  type PrivateRedis,
} from '../support/redis-server.js';

const RATE = { max: 5, windowMs: 60_000 };
const WAIT_LOCAL = { mode: 'waitaof', replicas: 0 } as const;
/**
 * Asks for a replica the test server does not have, strictly (a non-strict setting waits for the
 * replicas there are): every WAITAOF falls short.
 */
const WAIT_REPLICA = { mode: 'waitaof', replicas: 1, strict: true } as const;

/** WAITAOF calls the server has run so far. */
async function waitaofCalls(redis: Redis): Promise<number> {
  const stats = String(await redis.info('commandstats'));
  return Number(/^cmdstat_waitaof:calls=(\d+)/m.exec(stats)?.[1] ?? 0);
}

describe('the store waits for the disk where a crash must not undo a write (Valkey)', () => {
  const served = usePrivateRedis('valkey-server');

  const storeWith = (prefix: string, assessment: Pick<DurabilityAssessment, 'mode' | 'replicas'>) =>
    new DispatchStore(served().redis, keysFor(prefix), {
      eventsStream: `${prefix}:events`,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
      durability: { assessment: () => Promise.resolve(assessment), timeoutMs: 200 },
    });

  /** Two follow-ups of one agent job, registered (the producer waits for WAITAOF itself). */
  async function twoInOneLane(prefix: string): Promise<[DispatchRef, DispatchRef]> {
    const producer = createProducer({ redisUrl: served().server.url, prefix });
    try {
      const [a, b] = await producer.sendMany([
        { projectId: 'p', jobId: 'j', prompt: 'first' },
        { projectId: 'p', jobId: 'j', prompt: 'second' },
      ]);
      const ref = (dispatchId: string) => ({ dispatchId, projectId: 'p', jobId: 'j' });
      return [ref(a?.dispatchId ?? ''), ref(b?.dispatchId ?? '')];
    } finally {
      await producer.close();
    }
  }

  it('answers go only after WAITAOF, and releases the lane only after another', async () => {
    const store = storeWith('ok', WAIT_LOCAL);
    const [first, second] = await twoInOneLane('ok');
    const before = await waitaofCalls(served().redis);
    expect(await store.acquire(first, RATE, 20, 60_000, 'A')).toMatchObject({ kind: 'go' });
    expect((await waitaofCalls(served().redis)) - before).toBe(1);
    const record = await store.sends.get(first.dispatchId);
    const ended = await store.finish(record!, { type: 'followup.completed' });
    expect(ended).toEqual({ finished: true, nextDispatchId: second.dispatchId });
    expect((await waitaofCalls(served().redis)) - before).toBe(2);
  });

  it("a send's answer is on disk before MARK_SENT resolves; short of it, it throws and a rerun finds it marked", async () => {
    const store = storeWith('marked', WAIT_LOCAL);
    const [first] = await twoInOneLane('marked');
    expect(await store.acquire(first, RATE, 20, 60_000, 'A')).toMatchObject({ kind: 'go' });
    const before = await waitaofCalls(served().redis);
    expect(await store.markSent(first, 'sent', undefined, 1_000, 'A')).toBe('marked');
    expect((await waitaofCalls(served().redis)) - before).toBe(1);

    const short = storeWith('marked-short', WAIT_LOCAL);
    const [other] = await twoInOneLane('marked-short');
    expect(await short.acquire(other, RATE, 20, 60_000, 'B')).toMatchObject({ kind: 'go' });
    const shortOfReplicas = storeWith('marked-short', WAIT_REPLICA);
    await expect(shortOfReplicas.markSent(other, 'sent', undefined, 1_000, 'B')).rejects.toThrow(
      NotDurableError,
    );
    // The answer is written; retried (as the worker does), MARK_SENT finds its own state.
    expect(
      await served().redis.hget(keysFor('marked-short').dispatch(other.dispatchId), 'state'),
    ).toBe('sent');
    expect(await short.markSent(other, 'sent', undefined, 1_000, 'B')).toBe('marked');
  });

  it('writes asked for together wait for the disk once; short of it, every go is requeued', async () => {
    const inLanes = async (prefix: string): Promise<DispatchRef[]> => {
      const producer = createProducer({ redisUrl: served().server.url, prefix });
      try {
        const sent = await producer.sendMany(
          ['a', 'b', 'c'].map((jobId) => ({ projectId: 'p', jobId, prompt: jobId })),
        );
        return sent.map(({ dispatchId }, i) => ({ dispatchId, projectId: 'p', jobId: 'abc'[i]! }));
      } finally {
        await producer.close();
      }
    };
    const store = storeWith('together', WAIT_LOCAL);
    const refs = await inLanes('together');
    let before = await waitaofCalls(served().redis);
    const verdicts = await Promise.all(
      refs.map((ref, i) => store.acquire(ref, RATE, 20, 60_000, `T${i}`)),
    );
    expect(verdicts.map((v) => v.kind)).toEqual(['go', 'go', 'go']);
    expect((await waitaofCalls(served().redis)) - before).toBe(1);
    before = await waitaofCalls(served().redis);
    const marks = await Promise.all(
      refs.map((ref, i) => store.markSent(ref, 'sent', undefined, 1_000, `T${i}`)),
    );
    expect(marks).toEqual(['marked', 'marked', 'marked']);
    expect((await waitaofCalls(served().redis)) - before).toBe(1);

    const short = storeWith('together-short', WAIT_REPLICA);
    const others = await inLanes('together-short');
    const refused = await Promise.all(
      others.map((ref, i) => short.acquire(ref, RATE, 20, 60_000, `S${i}`)),
    );
    expect(refused.map((v) => v.kind)).toEqual(['not_durable', 'not_durable', 'not_durable']);
    const keys = keysFor('together-short');
    for (const ref of others)
      expect(await served().redis.hget(keys.dispatch(ref.dispatchId), 'state')).toBe('queued');
    expect(await served().redis.zcard(keys.budget('p'))).toBe(0);
  });

  it('an orphan event only for a job Redis still holds, and never while the record exists', async () => {
    const store = storeWith('orphan', WAIT_LOCAL);
    const keys = keysFor('orphan');
    const events = () => served().redis.xlen('orphan:events');
    const orphan = { bullJobId: 'k-1', dispatchId: 'k-1', jobKey: 'orphan:dispatch:k-1' };
    // A job a worker took just before a crash took back its enqueue: nothing is published.
    expect(
      await store.tracking.publishOrphan(orphan, { dispatchId: 'k-1' }, 'missing_record'),
    ).toBe('job-gone');
    await served().redis.hset(keys.dispatch('k-1'), 'state', 'queued');
    await served().redis.hset(orphan.jobKey, 'data', '{}');
    expect(
      await store.tracking.publishOrphan(orphan, { dispatchId: 'k-1' }, 'missing_record'),
    ).toBe('record-exists');
    expect(await events()).toBe(0);
    await served().redis.del(keys.dispatch('k-1'));
    expect(
      await store.tracking.publishOrphan(orphan, { dispatchId: 'k-1' }, 'missing_record'),
    ).toBe('published');
    expect(
      await store.tracking.publishOrphan(orphan, { dispatchId: 'k-1' }, 'missing_record'),
    ).toBe('published-before');
    expect(await events()).toBe(1);
  });

  it('a WAITAOF sent again after a reconnect vouches for nothing written before it', async () => {
    const client = new Redis(served().server.url, { maxRetriesPerRequest: null });
    try {
      await client.ping();
      const mark = await markWrite(client, 'reconnect');
      await client.set('reconnect', '1');
      await expect(waitForDisk(mark, WAIT_LOCAL, 1_000)).resolves.toBeUndefined();
      const reconnected = new Promise((resolve) => client.once('ready', resolve));
      client.disconnect(true);
      await reconnected;
      const error = await waitForDisk(mark, WAIT_LOCAL, 1_000).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NotDurableError);
      expect(String(error)).toMatch(/connection was re-established/);
    } finally {
      client.disconnect();
    }
  });

  it('without the copies asked for: requeues with the budget unit back, and wakes nobody', async () => {
    const store = storeWith('short', WAIT_REPLICA);
    const [first, second] = await twoInOneLane('short');
    const verdict = await store.acquire(first, RATE, 20, 60_000, 'A');
    expect(verdict).toMatchObject({ kind: 'not_durable' });
    expect(verdict.kind === 'not_durable' && verdict.reason).toMatch(/WAITAOF answered 1 local/);
    const keys = keysFor('short');
    expect(await served().redis.hget(keys.dispatch(first.dispatchId), 'state')).toBe('queued');
    expect(await served().redis.zcard(keys.budget('p'))).toBe(0);
    expect(await served().redis.zscore(keys.tracked, first.dispatchId)).toBeNull();
    // The lane's release is written, but its next one is not woken before it is on disk.
    const record = await store.sends.get(first.dispatchId);
    expect(await store.finish(record!, { type: 'followup.completed' })).toEqual({
      finished: true,
      nextDispatchId: undefined,
    });
    expect(await store.sends.isNext(second)).toBe(true);
  });
});

describe('the start-up check of a role process', () => {
  let redis7: PrivateRedis;
  let valkey: PrivateRedis;
  beforeAll(async () => {
    [redis7, valkey] = await Promise.all([
      startPrivateRedis('redis-server'),
      startPrivateRedis('valkey-server'),
    ]);
  });
  afterAll(async () => {
    await Promise.all([redis7.destroy(), valkey.destroy()]);
  });

  const env = (url: string, settings: Record<string, string> = {}) => ({
    REDIS_URL: url,
    DISPATCH_PREFIX: 'startup',
    AGENT_API_KEY: 'test-key',
    AGENT_API_URL: 'http://127.0.0.1:9',
    LOG_LEVEL: 'info',
    ...settings,
  });

  it('a strict setting on a server without WAITAOF or appendfsync always exits 2 naming appendfsync', async () => {
    for (const command of ['worker', 'poller', 'serve']) {
      const result = await runCliToEnd([command], env(redis7.url, { REDIS_DURABILITY: 'fsync!' }));
      expect(result.code, command).toBe(2);
      const refused = logLines(result.stdout).filter((l) => l['level'] === 50);
      expect(refused, command).toHaveLength(1);
      expect(String(refused[0]?.['msg'])).toMatch(
        /REDIS_DURABILITY is strict.*appendfsync everysec/,
      );
    }
  }, 60_000);

  /** Starts `worker` with METRICS_PORT, reads /readyz once ready, stops it; returns both. */
  async function workerOn(url: string, settings: Record<string, string> = {}) {
    const port = await freePort();
    const worker = runCli(['worker'], env(url, { METRICS_PORT: String(port), ...settings }));
    try {
      const ready = await eventually(
        async () => {
          const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
          return res?.status === 200 ? ((await res.json()) as Record<string, unknown>) : undefined;
        },
        { timeoutMs: 30_000, what: 'the worker to be ready' },
      );
      // The warning comes once the probe answered; /readyz shares that probe.
      await new Promise((r) => setTimeout(r, 200));
      expect(await worker.stop('SIGTERM')).toBe(0);
      return { ready, lines: logLines(worker.output.stdout) };
    } finally {
      await worker.stop('SIGKILL');
    }
  }

  it('Redis 7.0 with appendfsync everysec: one warning naming appendfsync, /readyz says at-risk', async () => {
    const { ready, lines } = await workerOn(redis7.url);
    expect(ready).toMatchObject({ status: 'ready', durability: 'at-risk' });
    const warned = lines.filter((l) => String(l['msg']).startsWith('redis:not-durable'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, mode: 'at-risk' });
    expect(String(warned[0]?.['msg'])).toMatch(
      /appendfsync everysec: a Redis crash can lose acknowledged writes.*sent twice/,
    );
  }, 60_000);

  it('Valkey: no warning, /readyz says waitaof; REDIS_DURABILITY=none says none', async () => {
    const valkeyRun = await workerOn(valkey.url, { REDIS_DURABILITY: 'fsync!' });
    expect(valkeyRun.ready).toMatchObject({ status: 'ready', durability: 'waitaof' });
    expect(valkeyRun.lines.filter((l) => Number(l['level']) >= 40)).toEqual([]);
    const none = await workerOn(redis7.url, { REDIS_DURABILITY: 'none' });
    expect(none.ready).toMatchObject({ durability: 'none' });
    expect(none.lines.filter((l) => Number(l['level']) >= 40)).toEqual([]);
  }, 60_000);

  it("says once, as information, when Redis would keep sent follow-ups' records as hashtables", async () => {
    const hinted = (lines: Record<string, unknown>[]) =>
      lines.filter((l) => String(l['msg']).startsWith('redis:records-not-compact'));
    const atDefault = await workerOn(redis7.url, { REDIS_DURABILITY: 'none' });
    expect(hinted(atDefault.lines)).toHaveLength(1);
    expect(hinted(atDefault.lines)[0]).toMatchObject({ level: 30, value: 64, recommended: 512 });
    const admin = new Redis(redis7.url);
    try {
      await admin.config('SET', 'hash-max-listpack-value', '512');
      const atShipped = await workerOn(redis7.url, { REDIS_DURABILITY: 'none' });
      expect(hinted(atShipped.lines)).toEqual([]);
    } finally {
      await admin.config('SET', 'hash-max-listpack-value', '64');
      admin.disconnect();
    }
  }, 60_000);

  it('starts without a word about it where CONFIG is refused (a managed service)', async () => {
    const admin = new Redis(redis7.url);
    try {
      await admin.call(
        'ACL',
        'SETUSER',
        'noconfig',
        'on',
        '>secret',
        '~*',
        '&*',
        '+@all',
        '-config',
      );
      const url = redis7.url.replace('redis://', 'redis://noconfig:secret@');
      const run = await workerOn(url, { REDIS_DURABILITY: 'none' });
      expect(run.ready).toMatchObject({ status: 'ready' });
      expect(
        run.lines.filter((l) => String(l['msg']).startsWith('redis:records-not-compact')),
      ).toEqual([]);
    } finally {
      await admin.call('ACL', 'DELUSER', 'noconfig');
      admin.disconnect();
    }
  }, 60_000);
});
