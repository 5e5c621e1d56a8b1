import type { Redis } from 'ioredis';
import { Gauge, type Registry } from 'prom-client';
import type { Keys, ShardView } from '../redis/keys.js';
import { within } from '../time/deadline.js';
import { BEATING_ROLES, countAlive } from './heartbeat.js';
import type { Logger } from './logger.js';
import { LIFECYCLE, METRIC_NAMES } from './names.js';

/**
 * The gauges read from Redis at scrape time: the queues' job counts, the tracked follow-ups, the
 * send pause, the poll lag, the oldest queued follow-up's age, the live role processes and the
 * paused projects, each per shard (label `shard`, `0` with one shard), and whether Redis answers.
 */

/**
 * A scrape must answer even when Redis does not: a worker-style connection waits forever for a
 * reconnect, so every Redis read at scrape time is cut off after this long.
 */
const SCRAPE_REDIS_TIMEOUT_MS = 2_000;

/** What `Metrics.watchRedis` reads at scrape time. */
export interface RedisSource {
  /** Every shard of the deployment: each gauge has one series per shard. */
  shards: readonly ShardView[];
  /** One connection for every shard (a cluster's on a cluster). */
  redis: Redis;
  /** Where scrape failures are logged; defaults to the logger given to `createMetrics`. */
  logger?: Logger;
}

/** The source a scrape reads: the one `watchRedis` was given last. */
export type Current = () => RedisSource | undefined;

/** Registers the scrape-time gauges; they read whatever source is current at scrape time. */
export function registerRedisGauges(
  registry: Registry,
  current: Current,
  fallbackLogger: Logger | undefined,
): void {
  const failed = scrapeFailure(fallbackLogger);
  new Gauge({
    name: METRIC_NAMES.queueJobs,
    help: 'Jobs in each BullMQ queue by state, read at scrape time.',
    labelNames: ['queue', 'state', 'shard'],
    registers: [registry],
    async collect() {
      this.reset();
      const src = current();
      if (!src) return;
      const queues = src.shards.flatMap((view) =>
        view.queues.map((queue) => ({ queue, shard: String(view.index) })),
      );
      await Promise.all(
        queues.map(async ({ queue, shard }) => {
          const counts = await withTimeout(queue.getJobCounts()).catch((err: unknown) => {
            failed(src, err, { queue: queue.name, shard });
            return undefined;
          });
          for (const [state, count] of Object.entries(counts ?? {}))
            this.set({ queue: queue.name, state, shard }, count);
        }),
      );
    },
  });
  const perShard = (
    name: string,
    help: string,
    read: (redis: Redis, keys: Keys) => Promise<number>,
  ) =>
    new Gauge({
      name,
      help,
      labelNames: ['shard'],
      registers: [registry],
      async collect() {
        this.reset();
        // A stale or zero figure would read as a healthy one: NaN shows as a gap on a graph.
        await eachShard(current, failed, read, Number.NaN, (shard, value) =>
          this.set({ shard }, value),
        );
      },
    });
  perShard(
    METRIC_NAMES.trackedFollowups,
    'Sent follow-ups whose agent job is being tracked, per shard, read at scrape time.',
    (redis, keys) => redis.zcard(keys.tracked),
  );
  perShard(
    METRIC_NAMES.authPaused,
    'Whether every send of the shard is paused because the agent API rejects the key (401/403) or redirects (3xx), read at scrape time.',
    (redis, keys) => redis.exists(keys.authPause),
  );
  new Gauge({
    name: METRIC_NAMES.redisUp,
    help: 'Whether Redis answered a PING within 2 s at scrape time (1) or not (0).',
    registers: [registry],
    async collect() {
      const src = current();
      if (!src) return;
      this.set(
        await withTimeout(src.redis.ping()).then(
          () => 1,
          () => 0,
        ),
      );
    },
  });
  perShard(
    METRIC_NAMES.pollLag,
    'How long the oldest due status read of the shard has been waiting, in seconds (0 when none is due).',
    async (redis, keys) => {
      const [oldest, time] = await Promise.all([
        redis.zrange(keys.tracked, 0, 0, 'WITHSCORES'),
        redis.time(),
      ]);
      const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const dueMs = oldest[1] === undefined ? nowMs : Number(oldest[1]);
      return Math.max(0, nowMs - dueMs) / 1000;
    },
  );
  perShard(
    METRIC_NAMES.oldestQueuedAge,
    'How long the follow-up next in line for a worker has been queued, in seconds (0 when none waits for one), read at scrape time.',
    oldestQueuedAge,
  );
  registerLivenessGauges(registry, current, failed);
}

/** Logs a Redis read of a scrape that failed; the gauge is left out. */
export type Failed = (src: RedisSource, err: unknown, fields?: object) => void;

/** The {@link Failed} that logs to the source's logger, else to `fallbackLogger`. */
export function scrapeFailure(fallbackLogger: Logger | undefined): Failed {
  return (src, err, fields = {}) =>
    (src.logger ?? fallbackLogger)?.warn({ err, ...fields }, LIFECYCLE.metricsScrapeFailed);
}

/**
 * The age since enqueue of the follow-up that waits longest for a worker: BullMQ's next job (the
 * tail of its wait list) and its most overdue delayed job (a park whose end has passed, which a
 * live worker would have woken), whichever is older. Those parked for their budget, lane or a
 * pause are left out until their wait ends: they wait by design, and their own gauges say so.
 * Two reads at the ends of a list and a sorted set, whatever the backlog's size.
 */
async function oldestQueuedAge(redis: Redis, keys: Keys): Promise<number> {
  const [time, next, delayed] = await Promise.all([
    redis.time(),
    redis.lindex(keys.dispatchQueue('wait'), -1),
    redis.zrange(keys.dispatchQueue('delayed'), 0, 0, 'WITHSCORES'),
  ]);
  const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const [overdue, score] = delayed;
  const ids = [next];
  // BullMQ scores a delayed job by its due time times 0x1000 (a counter in the low bits).
  if (overdue !== undefined && Math.floor(Number(score) / 0x1000) <= nowMs) ids.push(overdue);
  const stamps = await Promise.all(
    ids.flatMap((id) => (id ? [redis.hget(keys.dispatchQueue(id), 'timestamp')] : [])),
  );
  const since = Math.min(...stamps.flatMap((t) => (t === null ? [] : [Number(t)])));
  return Number.isFinite(since) ? Math.max(0, nowMs - since) / 1000 : 0;
}

/** The heartbeat count of each shard, and the projects an operator paused, since when. */
function registerLivenessGauges(registry: Registry, current: Current, failed: Failed): void {
  new Gauge({
    name: METRIC_NAMES.liveProcesses,
    help: 'Worker and poller processes whose heartbeat is alive, per role and shard, read at scrape time.',
    labelNames: ['role', 'shard'],
    registers: [registry],
    async collect() {
      this.reset();
      await eachShard(current, failed, countAlive, undefined, (shard, counts) => {
        // NaN, not 0, when Redis does not answer: "no worker alive" must not fire for that.
        for (const role of BEATING_ROLES) this.set({ role, shard }, counts?.[role] ?? Number.NaN);
      });
    },
  });
  new Gauge({
    name: METRIC_NAMES.projectPausedSince,
    help: 'When an operator paused a project (Unix time), per paused project, read at scrape time.',
    labelNames: ['project', 'shard'],
    registers: [registry],
    async collect() {
      this.reset();
      await eachShard(current, failed, pausedProjects, [], (shard, paused) => {
        for (const [project, sinceMs] of paused) this.set({ project, shard }, sinceMs / 1000);
      });
    },
  });
}

/**
 * Reads `read` on every shard of the current source and hands each answer to `use`; a shard
 * whose read fails or times out is logged and handed `fallback`, so one slow shard cannot fail
 * the scrape of the others.
 */
export async function eachShard<T, F>(
  current: Current,
  failed: Failed,
  read: (redis: Redis, keys: Keys) => Promise<T>,
  fallback: F,
  use: (shard: string, value: T | F) => void,
): Promise<void> {
  const src = current();
  if (!src) return;
  await Promise.all(
    src.shards.map(async (view) => {
      const shard = String(view.index);
      const value = await withTimeout(read(src.redis, view.keys)).catch((err: unknown) => {
        failed(src, err, { shard });
        return fallback;
      });
      use(shard, value);
    }),
  );
}

/** The paused projects of a shard and when each was paused: the controlled ones are few. */
async function pausedProjects(redis: Redis, keys: Keys): Promise<[string, number][]> {
  const projects = await redis.smembers(keys.controlledProjects);
  if (projects.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const project of projects)
    pipeline.hmget(keys.projectControls(project), 'paused', 'pausedAt');
  const replies = (await pipeline.exec()) ?? [];
  return projects.flatMap((project, i): [string, number][] => {
    const [err, values] = replies[i] ?? [new Error('no reply'), []];
    if (err) throw err;
    const [paused, pausedAt] = values as (string | null)[];
    return paused === '1' ? [[project, Number(pausedAt ?? 0)]] : [];
  });
}

function withTimeout<T>(promise: Promise<T>): Promise<T> {
  return within(promise, SCRAPE_REDIS_TIMEOUT_MS, () => {
    throw new Error(`no answer from Redis within ${SCRAPE_REDIS_TIMEOUT_MS} ms`);
  });
}
