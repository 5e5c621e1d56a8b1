import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { sweepLostJobs } from '../../src/poller/repair.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { METRIC_NAMES } from '../../src/telemetry/names.js';
import { useStore } from '../support/store.js';
import { parseExposition } from './exposition.js';

/**
 * The last repair pass's duration and end are read from Redis at scrape time, so `serve` exports
 * them whichever poller ended the pass, and a poller that ended one long ago leaves nothing stale.
 */
describe('the repair pass gauges', () => {
  const fixture = useStore('repair-gauges');
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0)) await close();
  });

  async function scrape(prefix: string, redis: ReturnType<typeof fixture>['ns']['redis']) {
    const metrics = createMetrics({ logger: createLogger('silent') });
    metrics.watchRedis({
      shards: [{ index: 0, name: 'shard 0', keys: keysFor(prefix), queues: [] }],
      redis,
    });
    const families = parseExposition(await metrics.registry.metrics());
    const sample = (name: string) => families.get(name)?.samples.map((s) => [s.labels, s.value]);
    return {
      seconds: sample(METRIC_NAMES.repairPassSeconds),
      ended: sample(METRIC_NAMES.repairPassEnded),
    };
  }

  it('exports the last pass of each shard from Redis, on a process that swept nothing', async () => {
    const { ns, store } = fixture();
    expect(await scrape(ns.prefix, ns.redis)).toEqual({ seconds: [], ended: [] });

    // A poller of its own sweeps a pass to its end.
    const config = ns.config({ REPAIR_GRACE: '1s', POLL_INTERVAL: '100ms' });
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    closing.push(() => queue.close());
    const poller = createMetrics({ logger: createLogger('silent') });
    const ctx = { config, store, queue, metrics: poller, logger: createLogger('silent') };
    let ticks = 0;
    while (!(await sweepLostJobs(ctx)).passEnded) if (++ticks > 5) throw new Error('no end');
    const [seconds, endedAt] = await ns.redis.hmget(
      keysFor(ns.prefix).repairLast,
      'seconds',
      'endedAt',
    );

    const scraped = await scrape(ns.prefix, ns.redis);
    expect(scraped.seconds).toEqual([[{ shard: '0' }, Number(seconds)]]);
    expect(scraped.ended).toEqual([[{ shard: '0' }, Number(endedAt) / 1000]]);
    // The poller's own registry has no copy of its own that could go stale.
    expect(await poller.registry.getSingleMetric(METRIC_NAMES.repairPassSeconds)).toBeUndefined();
  });
});
