import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createAdmin } from '../../src/producer/admin.js';
import { keysFor, QUEUE_NAMES, queueOptions } from '../../src/redis/keys.js';
import { countAlive, HEARTBEAT_TTL_MS, startHeartbeat } from '../../src/telemetry/heartbeat.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { METRIC_NAMES } from '../../src/telemetry/names.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { parseExposition } from '../telemetry/exposition.js';

const silent = createLogger('silent');

describe('the heartbeat of role processes', () => {
  const ns = useNamespace('heartbeat');

  it('counts each beating process by role, drops a stopped one at once and an expired one', async () => {
    const { redis, prefix } = ns();
    const keys = keysFor(prefix);
    const beats = [
      startHeartbeat(redis, keys, 'worker', silent),
      startHeartbeat(redis, keys, 'worker', silent),
      startHeartbeat(redis, keys, 'poller', silent),
    ];
    try {
      await eventually(async () => {
        const counts = await countAlive(redis, keys);
        return counts.worker === 2 && counts.poller === 1 ? counts : undefined;
      });
      const ttl = await redis.pttl(keys.aliveProcess((await redis.smembers(keys.alive))[0] ?? ''));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(HEARTBEAT_TTL_MS);

      await beats[0]?.stop();
      expect(await countAlive(redis, keys)).toEqual({ worker: 1, poller: 1 });

      // A killed process: its key expires (here at once), and the count forgets it.
      const poller = (await redis.smembers(keys.alive)).find((m) => m.startsWith('poller:'));
      await redis.del(keys.aliveProcess(poller ?? ''));
      expect(await countAlive(redis, keys)).toEqual({ worker: 1, poller: 0 });
      expect((await redis.smembers(keys.alive)).map((m) => m.split(':')[0])).toEqual(['worker']);
    } finally {
      await Promise.all(beats.map((b) => b?.stop()));
    }
  });
});

describe('the liveness gauges read at scrape time', () => {
  const ns = useNamespace('liveness-gauges');

  async function scrape(prefix: string) {
    const metrics = createMetrics({ logger: silent });
    const keys = keysFor(prefix);
    metrics.watchRedis({
      shards: [{ index: 0, name: 'shard 0', keys, queues: [] }],
      redis: ns().redis,
    });
    return parseExposition(await metrics.registry.metrics());
  }

  it('reports 0 live workers and pollers, no paused project, no queued age on an idle shard', async () => {
    const families = await scrape(ns().prefix);
    expect(families.get(METRIC_NAMES.liveProcesses)?.samples).toEqual([
      { name: METRIC_NAMES.liveProcesses, labels: { role: 'worker', shard: '0' }, value: 0 },
      { name: METRIC_NAMES.liveProcesses, labels: { role: 'poller', shard: '0' }, value: 0 },
    ]);
    expect(families.get(METRIC_NAMES.oldestQueuedAge)?.samples[0]?.value).toBe(0);
    expect(families.get(METRIC_NAMES.projectPausedSince)?.samples).toEqual([]);
  });

  it('ages the follow-up next in line and the most overdue delayed one, not one parked ahead', async () => {
    const { redis, prefix } = ns();
    const keys = keysFor(prefix);
    const queue = new Queue(QUEUE_NAMES.dispatch, { connection: redis, ...queueOptions(prefix) });
    try {
      const now = Date.now();
      await queue.add('followup', {}, { jobId: 'next', timestamp: now - 30_000 });
      await queue.add('followup', {}, { jobId: 'newer', timestamp: now - 5_000 });
      // Enqueued 2 h ago, parked until an hour from now (its budget): it waits by design.
      await queue.add(
        'followup',
        {},
        { jobId: 'parked', delay: 10_800_000, timestamp: now - 7_200_000 },
      );
      let age = (await scrape(prefix)).get(METRIC_NAMES.oldestQueuedAge)?.samples[0]?.value;
      expect(age).toBeGreaterThanOrEqual(30);
      expect(age).toBeLessThan(120);

      // Its park ended a minute ago and no worker woke it: it waits for a worker too.
      await redis.zadd(keys.dispatchQueue('delayed'), (now - 60_000) * 0x1000, 'parked');
      age = (await scrape(prefix)).get(METRIC_NAMES.oldestQueuedAge)?.samples[0]?.value;
      expect(age).toBeGreaterThanOrEqual(7_200);
    } finally {
      await queue.close();
    }
  });

  it('reports when each paused project was paused, and forgets it once resumed', async () => {
    const { redisUrl, prefix } = ns();
    const admin = createAdmin({ redisUrl, prefix });
    try {
      await admin.pauseProject('docs-site');
      await admin.setProjectLimit('api-ref', '5/1h');
      const { pausedAt } = await admin.showProject('docs-site');
      const samples = (await scrape(prefix)).get(METRIC_NAMES.projectPausedSince)?.samples;
      expect(samples).toEqual([
        {
          name: METRIC_NAMES.projectPausedSince,
          labels: { project: 'docs-site', shard: '0' },
          value: new Date(pausedAt ?? 0).getTime() / 1000,
        },
      ]);
      await admin.resumeProject('docs-site');
      expect((await scrape(prefix)).get(METRIC_NAMES.projectPausedSince)?.samples).toEqual([]);
    } finally {
      await admin.close();
    }
  });
});
