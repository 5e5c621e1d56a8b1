import type { Redis } from 'ioredis';
import { Gauge, type Registry } from 'prom-client';
import { parseRate } from '../config/units.js';
import type { Keys } from '../redis/keys.js';
import type { Logger } from './logger.js';
import { METRIC_NAMES } from './names.js';
import { eachShard, scrapeFailure, type Current } from './redis-gauges.js';

/**
 * The send limit of each project that has its own (`project limit P N/DURATION`), read at scrape
 * time: `agent_dispatch_project_send_limit_max{project,shard}` and
 * `agent_dispatch_project_send_limit_window_seconds{project,shard}`, as written. A project without
 * a series has `SEND_RATE_LIMIT` (`agent_dispatch_send_rate_limit_max`, `..._window_seconds`), so a
 * dashboard divides a project's sends by its own limit with `on (project)`, falling back to that.
 */
export function registerProjectLimitGauges(
  registry: Registry,
  current: Current,
  fallbackLogger: Logger | undefined,
): void {
  const failed = scrapeFailure(fallbackLogger);
  const gauge = (name: string, help: string, value: (rate: Limit) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['project', 'shard'],
      registers: [registry],
      async collect() {
        this.reset();
        await eachShard(current, failed, projectLimits, [], (shard, limits) => {
          for (const limit of limits) this.set({ project: limit.project, shard }, value(limit));
        });
      },
    });
  gauge(
    METRIC_NAMES.projectLimitMax,
    "A project's own send limit: sends allowed in one window, per project that has one (else SEND_RATE_LIMIT's), read at scrape time.",
    (limit) => limit.max,
  );
  gauge(
    METRIC_NAMES.projectLimitWindow,
    "A project's own send limit: the length of its window in seconds, per project that has one, read at scrape time.",
    (limit) => limit.windowMs / 1000,
  );
}

interface Limit {
  readonly project: string;
  readonly max: number;
  readonly windowMs: number;
}

/** The projects of a shard with a limit of their own: the controlled ones are few. */
async function projectLimits(redis: Redis, keys: Keys): Promise<Limit[]> {
  const projects = await redis.smembers(keys.controlledProjects);
  if (projects.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const project of projects) pipeline.hget(keys.projectControls(project), 'limit');
  const replies = (await pipeline.exec()) ?? [];
  return projects.flatMap((project, i): Limit[] => {
    const [err, text] = replies[i] ?? [new Error('no reply'), null];
    if (err) throw err;
    const rate = typeof text === 'string' ? parseRate(text) : undefined;
    return rate ? [{ project, max: rate.max, windowMs: rate.windowMs }] : [];
  });
}
