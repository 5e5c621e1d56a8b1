import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from './logger.js';
import { METRIC_NAMES } from './names.js';
import { registerProjectLimitGauges } from './project-gauges.js';
import { registerRepairGauges } from './repair-gauges.js';
import { registerRedisGauges, type RedisSource } from './redis-gauges.js';

export type { RedisSource } from './redis-gauges.js';

/** The process's metrics, on a registry of its own (not prom-client's global one). */
export interface Metrics {
  readonly registry: Registry;
  /**
   * Send outcomes: sent, rate_limited, rejected, transient, ambiguous, budget_wait, blocked,
   * auth_paused (held, or refused, while the agent API rejects the key), regrant (not written: its
   * budget grant was too old to arrive within the margin; given back), and not_durable (held:
   * Redis did not confirm the intent on disk).
   */
  readonly sends: Counter<'outcome'>;
  /** Agent API request latency by operation (send, get) and outcome (ok or an error code). */
  readonly apiLatency: Histogram<'operation' | 'outcome'>;
  /** Time a follow-up is parked waiting for its project's budget or a 429 park. */
  readonly budgetWait: Histogram<string>;
  /** Completion events published, by event type. */
  readonly eventsPublished: Counter<'type'>;
  /** From a run's end (estimated from the reads) to its event, by type: completed, failed, archived. */
  readonly runEndToEvent: Histogram<'type'>;
  /** Status reads by outcome: active, terminal, unknown, not_found, error. */
  readonly statusReads: Counter<'outcome'>;
  /** The adaptive in-flight limit of each worker. */
  readonly inFlightLimit: Gauge<'worker'>;
  /** Sends in flight in each worker. */
  readonly inFlight: Gauge<'worker'>;
  /** Poll ticks by outcome: ran, skipped, error. */
  readonly pollTicks: Counter<'outcome'>;
  /** Budget units spent (sends started) per project: with the rate limit, budget use per project. */
  readonly projectSends: Counter<'project'>;
  /**
   * When a project's 429 park ends, as a Unix time, per project; the park is over once it lies in
   * the past. Set by the worker that parked it (see {@link Metrics.parkProject}).
   */
  readonly projectParkedUntil: Gauge<'project'>;
  /** Records a 429 park of `projectId` until `untilMs`, and forgets parks that have ended. */
  parkProject(projectId: string, untilMs: number): void;
  /** Publishes `SEND_RATE_LIMIT`, so a dashboard can divide budget use by it. */
  setRateLimit(rate: { max: number; windowMs: number }): void;
  /**
   * Repairs of the poller's sweep, by outcome: readded (its BullMQ job was missing), replaced (its
   * job had ended while it was still queued), orphaned (its record was gone: one event).
   */
  readonly repairs: Counter<'outcome'>;
  /**
   * Batched store writes that failed for one follow-up alone (a key of the wrong type, a stored
   * value out of range), by op: acquire, mark_sent, reschedule, finish.
   */
  readonly storeItemErrors: Counter<'op'>;
  /**
   * Adds collectors that read Redis at scrape time, each with a `shard` label (`0` with one
   * shard): `agent_dispatch_queue_jobs{queue,state,shard}` (`queue.getJobCounts`),
   * `agent_dispatch_tracked_followups` (ZCARD of `keys.tracked`),
   * `agent_dispatch_poll_lag_seconds` (how overdue the oldest due status read is) and
   * `agent_dispatch_api_auth_paused` (1 while every send of the shard is paused because the agent
   * API rejects the key or redirects, else 0), `agent_dispatch_oldest_queued_age_seconds`,
   * `agent_dispatch_live_processes{role}` (heartbeats),
   * `agent_dispatch_project_paused_since_timestamp_seconds{project}` and each project's own limit
   * (`agent_dispatch_project_send_limit_max{project}`, `..._window_seconds`); and
   * `agent_dispatch_redis_up` (1 when Redis answered the scrape's PING in time, else 0), without
   * a shard.
   * Failures at scrape are logged, never thrown. A later call replaces the source of an earlier one.
   */
  watchRedis(source: RedisSource): void;
}

/** The `code` of an error, for the API latency metric's outcome label; `error` when it has none. */
export function errorCode(err: unknown): string {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : 'error';
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
  const parks = new Map<string, number>();

  const rateLimitMax = new Gauge({
    name: METRIC_NAMES.rateLimitMax,
    help: 'SEND_RATE_LIMIT: sends allowed per project in one window.',
    registers,
  });
  const rateLimitWindow = new Gauge({
    name: METRIC_NAMES.rateLimitWindow,
    help: 'SEND_RATE_LIMIT: the length of the window, in seconds.',
    registers,
  });

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
    runEndToEvent: new Histogram({
      name: METRIC_NAMES.runEndToEvent,
      help:
        "Seconds from an agent run's end to its completion event being written, by type. The API " +
        'gives no end time: the end is taken as the middle of the gap between the last status ' +
        'read that saw the run active (else its send) and the read that saw it ended, so this ' +
        'includes about half a poll interval of waiting for that read.',
      labelNames: ['type'],
      // POLL_INTERVAL is 5 s by default; reads of long runs back off to POLL_MAX_INTERVAL.
      buckets: [0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600],
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
    projectSends: new Counter({
      name: METRIC_NAMES.projectSends,
      help: 'Sends started (budget units spent) per project.',
      labelNames: ['project'],
      registers,
    }),
    projectParkedUntil: new Gauge({
      name: METRIC_NAMES.projectParkedUntil,
      help: 'Unix time at which the 429 park of a project ends (in the past: not parked).',
      labelNames: ['project'],
      registers,
    }),
    parkProject(projectId, untilMs) {
      const nowMs = Date.now();
      // A park that ended is dropped, so the label set stays as small as the set of parked projects.
      for (const [project, until] of parks) {
        if (until > nowMs) continue;
        parks.delete(project);
        metrics.projectParkedUntil.remove({ project });
      }
      parks.set(projectId, untilMs);
      metrics.projectParkedUntil.set({ project: projectId }, untilMs / 1000);
    },
    setRateLimit({ max, windowMs }) {
      rateLimitMax.set(max);
      rateLimitWindow.set(windowMs / 1000);
    },
    repairs: new Counter({
      name: METRIC_NAMES.repairs,
      help: 'Queued follow-ups whose lost BullMQ job the poller gave back, by outcome.',
      labelNames: ['outcome'],
      registers,
    }),
    storeItemErrors: new Counter({
      name: METRIC_NAMES.storeItemErrors,
      help: 'Store writes that failed for one follow-up alone (a broken key or stored value), by op.',
      labelNames: ['op'],
      registers,
    }),
    watchRedis(next) {
      if (!source) {
        registerRedisGauges(registry, () => source, options.logger);
        registerProjectLimitGauges(registry, () => source, options.logger);
        registerRepairGauges(registry, () => source, options.logger);
      }
      source = next;
    },
  };
  return metrics;
}
