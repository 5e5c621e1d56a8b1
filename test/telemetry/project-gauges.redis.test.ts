import { describe, expect, it } from 'vitest';
import { createAdmin } from '../../src/producer/admin.js';
import { keysFor } from '../../src/redis/keys.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { METRIC_NAMES } from '../../src/telemetry/names.js';
import { useNamespace } from '../support/namespace.js';
import { parseExposition } from './exposition.js';

/**
 * Each project's own send limit, read at scrape time, so a dashboard divides the project's sends
 * by its own limit (a project limited to 2/10m at 2 sends is at 100 %, not 2 % of the default).
 */

describe('the per-project send limit gauges', () => {
  const ns = useNamespace('project-gauges');

  async function scrape() {
    const metrics = createMetrics({ logger: createLogger('silent') });
    metrics.watchRedis({
      shards: [{ index: 0, name: 'shard 0', keys: keysFor(ns().prefix), queues: [] }],
      redis: ns().redis,
    });
    const families = parseExposition(await metrics.registry.metrics());
    const samples = (name: string) => families.get(name)?.samples.map((s) => [s.labels, s.value]);
    return {
      max: samples(METRIC_NAMES.projectLimitMax),
      window: samples(METRIC_NAMES.projectLimitWindow),
    };
  }

  it('reports each project with a limit of its own, as written, and forgets a cleared one', async () => {
    const admin = createAdmin({ redisUrl: ns().redisUrl, prefix: ns().prefix });
    try {
      expect(await scrape()).toEqual({ max: [], window: [] });
      await admin.setProjectLimit('docs-site', '2/10m');
      await admin.setProjectLimit('api-ref', '50/1h');
      // Paused without a limit of its own: SEND_RATE_LIMIT's, so no series.
      await admin.pauseProject('blog');
      const { max, window } = await scrape();
      expect(max).toEqual(
        expect.arrayContaining([
          [{ project: 'docs-site', shard: '0' }, 2],
          [{ project: 'api-ref', shard: '0' }, 50],
        ]),
      );
      expect(max).toHaveLength(2);
      expect(window).toEqual(
        expect.arrayContaining([
          [{ project: 'docs-site', shard: '0' }, 600],
          [{ project: 'api-ref', shard: '0' }, 3600],
        ]),
      );
      await admin.clearProjectLimit('docs-site');
      expect((await scrape()).max).toEqual([[{ project: 'api-ref', shard: '0' }, 50]]);
    } finally {
      await admin.close();
    }
  });
});
