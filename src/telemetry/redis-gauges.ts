import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { Gauge, type Registry } from 'prom-client';
import type { Keys } from '../redis/keys.js';
import { within } from '../runtime/deadline.js';
import type { Logger } from './logger.js';
import { LIFECYCLE, METRIC_NAMES } from './names.js';

/**
 * The gauges read from Redis at scrape time: the queues' job counts, the tracked follow-ups, the
 * fleet's send pause, whether Redis answers, and the poll lag.
 */

/**
 * A scrape must answer even when Redis does not: a worker-style connection waits forever for a
 * reconnect, so every Redis read at scrape time is cut off after this long.
 */
const SCRAPE_REDIS_TIMEOUT_MS = 2_000;

/** What `Metrics.watchRedis` reads at scrape time. */
export interface RedisSource {
  queues: readonly Queue[];
  redis: Redis;
  keys: Keys;
  /** Where scrape failures are logged; defaults to the logger given to `createMetrics`. */
  logger?: Logger;
}

type Current = () => RedisSource | undefined;

/** Registers the scrape-time gauges; they read whatever source is current at scrape time. */
export function registerRedisGauges(
  registry: Registry,
  current: Current,
  fallbackLogger: Logger | undefined,
): void {
  const failed = (src: RedisSource, err: unknown, fields: object = {}) =>
    (src.logger ?? fallbackLogger)?.warn({ err, ...fields }, LIFECYCLE.metricsScrapeFailed);
  new Gauge({
    name: METRIC_NAMES.queueJobs,
    help: 'Jobs in each BullMQ queue by state, read at scrape time.',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      const src = current();
      if (!src) return;
      await Promise.all(
        src.queues.map(async (queue) => {
          const counts = await withTimeout(queue.getJobCounts()).catch((err: unknown) => {
            failed(src, err, { queue: queue.name });
            return undefined;
          });
          for (const [state, count] of Object.entries(counts ?? {}))
            this.set({ queue: queue.name, state }, count);
        }),
      );
    },
  });
  const gauge = (name: string, help: string, read: (src: RedisSource) => Promise<number>) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const src = current();
        if (!src) return;
        try {
          this.set(await withTimeout(read(src)));
        } catch (err) {
          // A stale or zero figure would read as a healthy one: NaN shows as a gap on a graph.
          this.set(Number.NaN);
          failed(src, err);
        }
      },
    });
  gauge(
    METRIC_NAMES.trackedFollowups,
    'Sent follow-ups whose agent job is being tracked, read at scrape time.',
    (src) => src.redis.zcard(src.keys.tracked),
  );
  gauge(
    METRIC_NAMES.authPaused,
    'Whether every send of the fleet is paused because the agent API rejects the key (401/403) or redirects (3xx), read at scrape time.',
    (src) => src.redis.exists(src.keys.authPause),
  );
  gauge(
    METRIC_NAMES.redisUp,
    'Whether Redis answered a PING within 2 s at scrape time (1) or not (0).',
    (src) =>
      withTimeout(src.redis.ping()).then(
        () => 1,
        () => 0,
      ),
  );
  gauge(
    METRIC_NAMES.pollLag,
    'How long the oldest due status read has been waiting, in seconds (0 when none is due).',
    async (src) => {
      const [oldest, time] = await Promise.all([
        src.redis.zrange(src.keys.tracked, 0, 0, 'WITHSCORES'),
        src.redis.time(),
      ]);
      const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const dueMs = oldest[1] === undefined ? nowMs : Number(oldest[1]);
      return Math.max(0, nowMs - dueMs) / 1000;
    },
  );
}

function withTimeout<T>(promise: Promise<T>): Promise<T> {
  return within(promise, SCRAPE_REDIS_TIMEOUT_MS, () => {
    throw new Error(`no answer from Redis within ${SCRAPE_REDIS_TIMEOUT_MS} ms`);
  });
}
