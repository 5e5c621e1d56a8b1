import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Keys } from '../redis/keys.js';
import type { Logger } from './logger.js';

/** Metric names, defined once. Every name starts with `agent_dispatch_`. */
export const METRIC_NAMES = {
  sends: 'agent_dispatch_sends_total',
  apiLatency: 'agent_dispatch_api_request_duration_seconds',
  budgetWait: 'agent_dispatch_budget_wait_seconds',
  eventsPublished: 'agent_dispatch_events_published_total',
  statusReads: 'agent_dispatch_status_reads_total',
  inFlightLimit: 'agent_dispatch_worker_inflight_limit',
  inFlight: 'agent_dispatch_worker_inflight',
  pollTicks: 'agent_dispatch_poll_ticks_total',
  queueJobs: 'agent_dispatch_queue_jobs',
  trackedFollowups: 'agent_dispatch_tracked_followups',
  authPaused: 'agent_dispatch_api_auth_paused',
} as const;

/**
 * A scrape must answer even when Redis does not: a worker-style connection waits forever for a
 * reconnect, so every Redis read at scrape time is cut off after this long.
 */
const SCRAPE_REDIS_TIMEOUT_MS = 2_000;

/** What {@link Metrics.watchRedis} reads at scrape time. */
export interface RedisSource {
  queues: Queue[];
  redis: Redis;
  keys: Keys;
  /** Where scrape failures are logged; defaults to the logger given to {@link createMetrics}. */
  logger?: Logger;
}

/** The process's metrics, on a registry of its own (not prom-client's global one). */
export interface Metrics {
  readonly registry: Registry;
  /**
   * Send outcomes: sent, rate_limited, rejected, transient, ambiguous, budget_wait, blocked, and
   * auth_paused (held, or refused, while the agent API rejects the key).
   */
  readonly sends: Counter<'outcome'>;
  /** Agent API request latency by operation (send, get) and outcome (ok or an error code). */
  readonly apiLatency: Histogram<'operation' | 'outcome'>;
  /** Time a follow-up is parked waiting for its project's budget or a 429 park. */
  readonly budgetWait: Histogram<string>;
  /** Completion events published, by event type. */
  readonly eventsPublished: Counter<'type'>;
  /** Status reads by outcome: active, terminal, unknown, not_found, error. */
  readonly statusReads: Counter<'outcome'>;
  /** The adaptive in-flight limit of each worker. */
  readonly inFlightLimit: Gauge<'worker'>;
  /** Sends in flight in each worker. */
  readonly inFlight: Gauge<'worker'>;
  /** Poll ticks by outcome: ran, skipped, error. */
  readonly pollTicks: Counter<'outcome'>;
  /**
   * Adds collectors that read Redis at scrape time: `agent_dispatch_queue_jobs{queue,state}`
   * (`queue.getJobCounts`), `agent_dispatch_tracked_followups` (ZCARD of `keys.tracked`) and
   * `agent_dispatch_api_auth_paused` (1 while every send of the fleet is paused because the agent
   * API rejects the key or redirects, else 0).
   * Failures at scrape are logged, never thrown. A later call replaces the source of an earlier one.
   */
  watchRedis(source: RedisSource): void;
}

/** Options of {@link createMetrics}. */
export interface MetricsOptions {
  /** Logs failures of scrape-time Redis reads. Without it they are dropped silently. */
  logger?: Logger;
}

/** Creates the metrics of one process, plus prom-client's default process metrics. */
export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  let source: RedisSource | undefined;

  const metrics: Metrics = {
    registry,
    sends: new Counter({
      name: METRIC_NAMES.sends,
      help: 'Send attempts by outcome.',
      labelNames: ['outcome'],
      registers,
    }),
    apiLatency: new Histogram({
      name: METRIC_NAMES.apiLatency,
      help: 'Agent API request duration by operation and outcome.',
      labelNames: ['operation', 'outcome'],
      // From loopback (ms) to the 30 s default SEND_TIMEOUT.
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    budgetWait: new Histogram({
      name: METRIC_NAMES.budgetWait,
      help: "Time a follow-up waited for its project's send budget or a 429 park.",
      // The default budget is 100 per hour, so waits run up to an hour and beyond.
      buckets: [1, 5, 15, 60, 300, 900, 1800, 3600, 7200],
      registers,
    }),
    eventsPublished: new Counter({
      name: METRIC_NAMES.eventsPublished,
      help: 'Completion events published, by type.',
      labelNames: ['type'],
      registers,
    }),
    statusReads: new Counter({
      name: METRIC_NAMES.statusReads,
      help: 'Agent job status reads by outcome.',
      labelNames: ['outcome'],
      registers,
    }),
    inFlightLimit: new Gauge({
      name: METRIC_NAMES.inFlightLimit,
      help: 'Adaptive limit of sends in flight per worker.',
      labelNames: ['worker'],
      registers,
    }),
    inFlight: new Gauge({
      name: METRIC_NAMES.inFlight,
      help: 'Sends in flight per worker.',
      labelNames: ['worker'],
      registers,
    }),
    pollTicks: new Counter({
      name: METRIC_NAMES.pollTicks,
      help: 'Poll ticks by outcome.',
      labelNames: ['outcome'],
      registers,
    }),
    watchRedis(next) {
      if (!source) registerRedisCollectors(registry, () => source, options.logger);
      source = next;
    },
  };
  return metrics;
}

/** Registers the scrape-time gauges; they read whatever source is current at scrape time. */
function registerRedisCollectors(
  registry: Registry,
  current: () => RedisSource | undefined,
  fallbackLogger: Logger | undefined,
): void {
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
            (src.logger ?? fallbackLogger)?.warn(
              { err, queue: queue.name },
              'metrics:scrape-failed',
            );
            return undefined;
          });
          for (const [state, count] of Object.entries(counts ?? {}))
            this.set({ queue: queue.name, state }, count);
        }),
      );
    },
  });
  new Gauge({
    name: METRIC_NAMES.trackedFollowups,
    help: 'Sent follow-ups whose agent job is being tracked, read at scrape time.',
    registers: [registry],
    async collect() {
      const src = current();
      if (!src) return;
      try {
        this.set(await withTimeout(src.redis.zcard(src.keys.tracked)));
      } catch (err) {
        // A stale or zero figure would read as a healthy one: NaN shows as a gap on a graph.
        this.set(Number.NaN);
        (src.logger ?? fallbackLogger)?.warn({ err }, 'metrics:scrape-failed');
      }
    },
  });
  new Gauge({
    name: METRIC_NAMES.authPaused,
    help: 'Whether every send of the fleet is paused because the agent API rejects the key (401/403) or redirects (3xx), read at scrape time.',
    registers: [registry],
    async collect() {
      const src = current();
      if (!src) return;
      try {
        this.set(await withTimeout(src.redis.exists(src.keys.authPause)));
      } catch (err) {
        this.set(Number.NaN);
        (src.logger ?? fallbackLogger)?.warn({ err }, 'metrics:scrape-failed');
      }
    },
  });
}

function withTimeout<T>(promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer from Redis within ${SCRAPE_REDIS_TIMEOUT_MS} ms`)),
      SCRAPE_REDIS_TIMEOUT_MS,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
