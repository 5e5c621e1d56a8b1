/**
 * Redis commands one view of the follow-ups page costs (`admin.overview()`, what
 * `/dashboard/followups` reads), with a backlog of N queued follow-ups and no worker: the
 * difference of `INFO commandstats` around one view (commands run inside scripts included, the
 * INFO itself left out).
 *
 *   npx tsx bench/page-cost.ts [--queued 200000] [--projects 20]
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { createAdmin, createProducer } from '../src/producer/index.js';
import { startPrivateRedis } from '../test/support/redis-server.js';

const { values } = parseArgs({
  options: {
    queued: { type: 'string', default: '200000' },
    projects: { type: 'string', default: '20' },
  },
});
const queued = Number(values.queued);
const projects = Number(values.projects);

const server = await startPrivateRedis('redis-server', { appendonly: 'no' });
const redis = new Redis(server.url);
const options = { redisUrl: server.url, durability: { mode: 'none' } as const };
const producer = createProducer(options);
const admin = createAdmin(options);
try {
  const batch = 1000;
  for (let sent = 0; sent < queued; sent += batch) {
    const n = Math.min(batch, queued - sent);
    await producer.sendMany(
      Array.from({ length: n }, (_, i) => ({
        projectId: `project-${(sent + i) % projects}`,
        jobId: `job-${sent + i}`,
        prompt: 'x'.repeat(64),
      })),
    );
  }
  await admin.overview(); // warms the connection and the layout read
  const before = await commandCounts(redis);
  const overview = await admin.overview();
  const after = await commandCounts(redis);
  let total = 0;
  const byName: Record<string, number> = {};
  for (const [name, calls] of after) {
    const diff = calls - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0);
    if (diff > 0) byName[name] = diff;
    total += Math.max(0, diff);
  }
  const shown = overview.projects.reduce((sum, p) => sum + p.queued, 0);
  console.log(
    JSON.stringify({ queued, projects, commandsPerView: total, byName, queuedCounted: shown }),
  );
} finally {
  await producer.close();
  await admin.close();
  redis.disconnect();
  await server.destroy();
}

/** `INFO commandstats` as calls per command. */
async function commandCounts(client: Redis): Promise<Map<string, number>> {
  const text = await client.info('commandstats');
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    counts.set(m[1] as string, Number(m[2]));
  return counts;
}
