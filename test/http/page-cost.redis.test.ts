import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createAdmin, createProducer } from '../../src/producer/index.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';

/**
 * What one view of the follow-ups page (`admin.overview()`) costs Redis does not grow with the
 * backlog: the same commands at 1,000 and at 20,000 queued follow-ups (a private server, so that
 * `INFO commandstats` counts this test's commands only, those run inside scripts included), and
 * the counts it shows are exact.
 */
describe('the follow-ups page with a backlog', () => {
  let server: PrivateRedis;
  let client: Redis;
  beforeAll(async () => {
    server = await startPrivateRedis('redis-server', { appendonly: 'no' });
    client = new Redis(server.url);
  });
  afterAll(async () => {
    client?.disconnect();
    await server?.destroy();
  });

  const calls = async () => {
    const counts = new Map<string, number>();
    for (const m of (await client.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
      counts.set(m[1] as string, Number(m[2]));
    return counts;
  };

  it('reads as many commands at 20,000 queued as at 1,000', { timeout: 120_000 }, async () => {
    const options = { redisUrl: server.url, durability: { mode: 'none' } as const };
    const producer = createProducer(options);
    const admin = createAdmin(options);
    let queued = 0;
    const fill = async (to: number) => {
      for (; queued < to; queued += 1000)
        await producer.sendMany(
          Array.from({ length: 1000 }, (_, i) => ({
            projectId: `p${(queued + i) % 10}`,
            jobId: `job-${queued + i}`,
            prompt: 'x',
          })),
        );
    };
    /** The commands of one view, by name (the INFO that reads them left out). */
    const view = async () => {
      const before = await calls();
      const overview = await admin.overview();
      const after = await calls();
      const diff: Record<string, number> = {};
      for (const [name, n] of after) {
        const d = n - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0);
        if (d > 0) diff[name] = d;
      }
      return { diff, overview };
    };
    try {
      await fill(1000);
      await admin.overview();
      const small = await view();
      await fill(20_000);
      const large = await view();
      expect(large.diff).toEqual(small.diff);
      const total = Object.values(large.diff).reduce((a, b) => a + b, 0);
      // 10 projects: a script call and its reads each, and a few reads of the whole page.
      expect(total).toBeLessThan(150);
      expect(large.overview.projects).toHaveLength(10);
      expect(large.overview.projects.reduce((sum, p) => sum + p.queued, 0)).toBe(20_000);
      expect(large.overview.queued).toHaveLength(20);
    } finally {
      await producer.close();
      await admin.close();
    }
  });
});
