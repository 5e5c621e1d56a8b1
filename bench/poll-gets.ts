/**
 * GETs per completed follow-up for simulated work times of 1 s, 30 s and 5 min, with the default
 * poll settings (POLL_INTERVAL 5s, POLL_MIN_INTERVAL 1s, POLL_MAX_INTERVAL 1m, ACTIVE_GRACE 2m).
 * Outside CI: it takes as long as the longest run, about 6 minutes.
 *
 *   npx tsx bench/poll-gets.ts [--followups 20]
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config/index.js';
import { startConsumer } from '../src/consumer/index.js';
import { startPoller } from '../src/poller/index.js';
import { createProducer } from '../src/producer/index.js';
import { startSimulator } from '../src/simulator/index.js';
import { createLogger } from '../src/telemetry/logger.js';
import { createMetrics } from '../src/telemetry/metrics.js';
import { startPrivateRedis } from '../test/support/redis-server.js';

const WORK_TIMES_MS = { '1s': 1_000, '30s': 30_000, '5m': 300_000 } as const;
const { values } = parseArgs({ options: { followups: { type: 'string', default: '20' } } });
const perWorkTime = Number(values.followups);

const redis = await startPrivateRedis();
const apiKey = 'poll-gets-key';
const simulator = await startSimulator({
  apiKey,
  autoCreateJobs: true,
  workTimeMs: (projectId) => WORK_TIMES_MS[projectId as keyof typeof WORK_TIMES_MS] ?? 1_000,
});
const config = loadConfig({
  REDIS_URL: redis.url,
  AGENT_API_URL: simulator.url,
  AGENT_API_KEY: apiKey,
  LOG_LEVEL: 'warn',
});
const logger = createLogger('warn');
const metrics = createMetrics();
const roles = [
  startConsumer({ config, logger, metrics }),
  startPoller({ config, logger, metrics }),
];
const producer = createProducer({ redisUrl: redis.url });
const started = Date.now();
const inputs = Object.keys(WORK_TIMES_MS).flatMap((projectId) =>
  Array.from({ length: perWorkTime }, (_, i) => ({
    projectId,
    jobId: `job-${i}`,
    prompt: `work ${projectId} #${i}`,
  })),
);
await producer.sendMany(inputs);
console.log(`${inputs.length} follow-ups: ${perWorkTime} per work time; waiting for every event`);

const probe = await import('ioredis').then(({ Redis }) => new Redis(redis.url));
for (;;) {
  const events = await probe.xlen(config.eventsStream);
  if (events >= inputs.length) break;
  process.stdout.write(
    `\r${Math.round((Date.now() - started) / 1000)} s: ${events}/${inputs.length} events`,
  );
  await new Promise((r) => setTimeout(r, 5_000));
}
console.log(
  '\n\n| work time | follow-ups | GETs | GETs per completed follow-up |\n| --- | --- | --- | --- |',
);
for (const projectId of Object.keys(WORK_TIMES_MS)) {
  const gets = simulator.countGets(projectId);
  console.log(`| ${projectId} | ${perWorkTime} | ${gets} | ${(gets / perWorkTime).toFixed(1)} |`);
}
console.log(`\nall events after ${Math.round((Date.now() - started) / 1000)} s`);
probe.disconnect();
await producer.close();
for (const role of roles) await role.close();
await simulator.close();
await redis.destroy();
