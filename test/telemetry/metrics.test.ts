import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/redis/connections.js';
import { keysFor } from '../../src/redis/keys.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { METRIC_NAMES } from '../../src/telemetry/names.js';
import { expectNoLeakedHandles, useTestServer } from '../http/fixture.js';
import { freePort } from '../support/redis-server.js';
import { parseExposition } from './exposition.js';

// Runs after every describe block's own cleanup.
afterAll(() => expectNoLeakedHandles());

describe('/metrics', () => {
  const served = useTestServer('metrics');

  it('serves valid Prometheus text with every metric, including the Redis-backed ones', async () => {
    const { metrics, queues } = served.app;
    metrics.sends.inc({ outcome: 'sent' });
    metrics.apiLatency.observe({ operation: 'send', outcome: 'ok' }, 0.12);
    metrics.budgetWait.observe(42);
    metrics.eventsPublished.inc({ type: 'followup.completed' });
    metrics.statusReads.inc({ outcome: 'terminal' });
    metrics.inFlightLimit.set({ worker: 'w1' }, 16);
    metrics.inFlight.set({ worker: 'w1' }, 3);
    metrics.pollTicks.inc({ outcome: 'ran' });
    await queues[0]?.add('followup', { n: 1 });
    await queues[0]?.add('followup', { n: 2 }, { delay: 60_000 });
    await served.ns.redis.zadd(keysFor(served.ns.prefix).tracked, 1, 'a', 2, 'b', 3, 'c');

    const res = await fetch(`${served.app.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = parseExposition(await res.text());

    for (const name of Object.values(METRIC_NAMES)) expect(families.has(name), name).toBe(true);
    expect(families.get('process_cpu_user_seconds_total')?.type).toBe('counter');
    const value = (family: string, labels: Record<string, string> = {}, suffix = '') =>
      families
        .get(family)
        ?.samples.find(
          (s) =>
            s.name === family + suffix &&
            Object.entries(labels).every(([k, v]) => s.labels[k] === v),
        )?.value;
    expect(value(METRIC_NAMES.sends, { outcome: 'sent' })).toBe(1);
    expect(value(METRIC_NAMES.queueJobs, { queue: 'dispatch', state: 'waiting' })).toBe(1);
    expect(value(METRIC_NAMES.queueJobs, { queue: 'dispatch', state: 'delayed' })).toBe(1);
    expect(value(METRIC_NAMES.queueJobs, { queue: 'poll', state: 'active' })).toBe(0);
    expect(value(METRIC_NAMES.trackedFollowups)).toBe(3);
    // The oldest tracked read was due at epoch ms 1: decades overdue. Redis answered the PING.
    expect(value(METRIC_NAMES.pollLag)).toBeGreaterThan(1e9);
    expect(value(METRIC_NAMES.redisUp)).toBe(1);
    expect(value(METRIC_NAMES.authPaused)).toBe(0);
    expect(families.get(METRIC_NAMES.apiLatency)?.type).toBe('histogram');
    expect(value(METRIC_NAMES.apiLatency, { operation: 'send', outcome: 'ok' }, '_count')).toBe(1);
  });
});

describe('budget and park metrics', () => {
  it('keeps a parked-until figure only for projects whose park has not ended', async () => {
    const metrics = createMetrics();
    metrics.setRateLimit({ max: 100, windowMs: 3_600_000 });
    metrics.projectSends.inc({ project: 'docs' }, 3);
    metrics.parkProject('old', Date.now() - 1_000);
    const until = Date.now() + 60_000;
    metrics.parkProject('hot', until);
    const families = parseExposition(await metrics.registry.metrics());
    const samples = (name: string) => families.get(name)?.samples ?? [];
    expect(samples(METRIC_NAMES.projectParkedUntil)).toEqual([
      { name: METRIC_NAMES.projectParkedUntil, labels: { project: 'hot' }, value: until / 1000 },
    ]);
    expect(samples(METRIC_NAMES.projectSends)[0]).toMatchObject({
      labels: { project: 'docs' },
      value: 3,
    });
    expect(samples(METRIC_NAMES.rateLimitMax)[0]?.value).toBe(100);
    expect(samples(METRIC_NAMES.rateLimitWindow)[0]?.value).toBe(3_600);
  });
});

describe('watchRedis', () => {
  it('answers a scrape when Redis does not, logging instead of throwing', async () => {
    const lines: { msg: string }[] = [];
    const logger = createLogger('warn', {
      write: (line: string) => void lines.push(JSON.parse(line)),
    });
    const metrics = createMetrics({ logger });
    // Nothing listens on this port: a worker-style connection waits for it forever.
    const redis = connect(`redis://127.0.0.1:${await freePort()}`, 'worker', 'test-dead');
    redis.on('error', () => {});
    const queue = new Queue('dispatch', { connection: redis, prefix: 't-dead' });
    queue.on('error', () => {});
    try {
      const keys = keysFor('t-dead');
      metrics.watchRedis({ shards: [{ index: 0, name: 'shard 0', keys, queues: [queue] }], redis });
      const families = parseExposition(await metrics.registry.metrics());
      expect(families.get(METRIC_NAMES.queueJobs)?.samples).toEqual([]);
      expect(families.get(METRIC_NAMES.trackedFollowups)?.samples[0]?.value).toBeNaN();
      expect(families.get(METRIC_NAMES.pollLag)?.samples[0]?.value).toBeNaN();
      expect(families.get(METRIC_NAMES.redisUp)?.samples[0]?.value).toBe(0);
      expect(families.get(METRIC_NAMES.authPaused)?.samples[0]?.value).toBeNaN();
      // Unknown, never 0: "no worker alive" must not fire when Redis is what is down.
      const live = families.get(METRIC_NAMES.liveProcesses)?.samples ?? [];
      expect(live.map((s) => s.labels['role'])).toEqual(['worker', 'poller']);
      for (const sample of live) expect(sample.value).toBeNaN();
      expect(families.get(METRIC_NAMES.oldestQueuedAge)?.samples[0]?.value).toBeNaN();
      expect(families.get(METRIC_NAMES.projectPausedSince)?.samples).toEqual([]);
      expect(families.get(METRIC_NAMES.projectLimitMax)?.samples).toEqual([]);
      expect(families.get(METRIC_NAMES.projectLimitWindow)?.samples).toEqual([]);
      expect(families.get(METRIC_NAMES.repairPassSeconds)?.samples).toEqual([]);
      expect(families.get(METRIC_NAMES.repairPassEnded)?.samples).toEqual([]);
      expect(lines.filter((l) => l.msg === 'metrics:scrape-failed')).toHaveLength(11);
    } finally {
      await queue.close().catch(() => {});
      redis.disconnect();
    }
  });
});
