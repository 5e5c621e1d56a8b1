import { hostname } from 'node:os';
import { DelayedError, Worker } from 'bullmq';
import { QUEUE_NAMES } from '../redis/keys.js';
import { markSentRetryMs } from '../dispatch/in-flight.js';
import { z } from 'zod';
import { identifier } from '../dispatch/followup.js';
import {
  DISPATCH_JOB_RETENTION,
  type DispatchJobData,
  type DispatchJobRef,
} from '../store/jobs.js';
import { TRACEPARENT } from '../telemetry/trace-context.js';
import { openRoleResources } from '../runtime/resources.js';
import { roleOf, type Role, type RoleOptions } from '../runtime/role.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { inProcessSpan } from '../telemetry/tracing.js';
import { onFailed } from './endings.js';
import { createProcessor } from './send.js';

/**
 * The consumer role's process: its BullMQ Worker, the payload of each job it takes
 * (`readDispatchJob`), and its own limit on sends in flight (`ConcurrencyController`). What one
 * follow-up's run does, from ACQUIRE to its answer, is `send.ts`'s.
 */

/**
 * Starts the consumer role: a BullMQ Worker that sends follow-ups. Run as many processes as
 * needed; the per-project budget and the lanes live in Redis, so they hold across all of them.
 */
export function startConsumer(options: RoleOptions): Role {
  const { config, metrics } = options;
  const workerId = `${hostname()}:${process.pid}`;
  const logger = options.logger.child({ role: 'worker', workerId });
  const resources = openRoleResources('worker', { ...options, logger });
  const concurrency = new ConcurrencyController({
    max: config.workerConcurrency,
    onChange: (limit, reason) => {
      metrics.inFlightLimit.set({ worker: workerId }, limit);
      // Only answers change the limit, and answers come after the worker below exists.
      worker.concurrency = limit;
      logger.info({ limit, reason }, LIFECYCLE.concurrencyChanged);
    },
  });
  metrics.inFlightLimit.set({ worker: workerId }, concurrency.limit);
  metrics.setRateLimit(config.sendRateLimit);
  const processJob = createProcessor({
    ...resources,
    concurrency,
    workerId,
    rateLimitStreak: new Map(),
    outcomeRetryMs: markSentRetryMs(config),
  });
  let inFlight = 0;
  const worker = new Worker<DispatchJobData, string>(
    QUEUE_NAMES.dispatch,
    async (job, token) => {
      metrics.inFlight.set({ worker: workerId }, ++inFlight);
      try {
        // One `process dispatch` span per run, in the follow-up's trace; a park is no failure.
        // A payload that cannot be read is a poison job, ended by the processor.
        const ref = readDispatchJob(job);
        return await inProcessSpan(
          {
            dispatchId: ref?.dispatchId,
            traceparent: ref?.traceparent,
            attempt: job.attemptsMade + 1,
          },
          (err) => err instanceof DelayedError,
          () => processJob(job, ref, token),
        );
      } finally {
        metrics.inFlight.set({ worker: workerId }, --inFlight);
      }
    },
    {
      connection: resources.workerRedis,
      prefix: config.prefix,
      concurrency: concurrency.limit,
      // A job whose worker died is run again; the rerun reads the dispatch record first and never
      // resends blindly. More than 10 deaths on one job is a crash loop: it fails, and ends
      // undeliverable below.
      maxStalledCount: 10,
      lockDuration: config.stalledTimeoutMs,
      stalledInterval: config.stalledTimeoutMs,
      ...DISPATCH_JOB_RETENTION,
    },
  );
  worker.on('error', (err) => logger.error({ err }, LIFECYCLE.redisError));
  worker.on('failed', (job, err) => {
    if (job) void onFailed(resources, job, readDispatchJob(job), err);
  });
  logger.info(
    { concurrency: concurrency.limit, rate: config.sendRateLimit },
    LIFECYCLE.roleStarted,
  );
  return roleOf({ name: 'worker', config, logger, worker, after: [() => resources.close()] });
}

/**
 * A dispatch job's payload as a worker reads it (its format: store/jobs.ts). A payload with other
 * fields was written by something else: it is not read.
 */
const payload = z.strictObject({
  // Checked as the producer checks them, before ACQUIRE spends anything on the job: the ids go
  // into keys and the URL of the POST.
  p: identifier,
  j: identifier,
  /** The dispatch id; the BullMQ job's id when absent. */
  d: z.string().min(1).optional(),
  /** The follow-up's trace context (also in its record), so a worker's span joins its trace. */
  // A malformed one is dropped, never a reason to refuse the job.
  t: z.string().regex(TRACEPARENT).optional().catch(undefined),
});

/**
 * Reads the dispatch a BullMQ job carries; `undefined` when its payload cannot be read (a poison
 * job).
 */
export function readDispatchJob(job: {
  readonly id?: string | undefined;
  readonly data: unknown;
}): DispatchJobRef | undefined {
  const read = payload.safeParse(job.data);
  const dispatchId = read.data?.d ?? job.id;
  if (!read.success || !dispatchId) return undefined;
  return { dispatchId, projectId: read.data.p, jobId: read.data.j, traceparent: read.data.t };
}

/**
 * A worker's own limit on sends in flight, additive increase / multiplicative decrease, as TCP
 * does: halve on a 429 or a slow answer, grow by one after a limit's worth of healthy answers.
 * The fleet-wide budget is enforced in Redis; this only keeps one process from piling requests on
 * an API that is already pushing back.
 */
export interface ConcurrencyOptions {
  /** Upper bound: `WORKER_CONCURRENCY`. */
  readonly max: number;
  /** An answer slower than this counts as congestion. @defaultValue 5000 */
  readonly slowMs?: number;
  /** Decreases closer together than this count once. @defaultValue 1000 */
  readonly cooldownMs?: number;
  /** Called when the limit changes. */
  readonly onChange?: (limit: number, reason: 'increase' | 'rate_limited' | 'slow') => void;
  readonly now?: () => number;
}

/** The AIMD controller. */
export class ConcurrencyController {
  private current: number;
  private credit = 0;
  private lastDecreaseAt = -Infinity;
  private readonly slowMs: number;
  private readonly cooldownMs: number;
  private readonly now: () => number;

  constructor(private readonly options: ConcurrencyOptions) {
    this.current = options.max;
    this.slowMs = options.slowMs ?? 5_000;
    this.cooldownMs = options.cooldownMs ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  /** The current limit. */
  get limit(): number {
    return this.current;
  }

  /** A send answered; `latencyMs` decides whether it counts as healthy or slow. */
  onAnswer(latencyMs: number): void {
    if (latencyMs > this.slowMs) {
      this.decrease('slow');
      return;
    }
    if (this.current >= this.options.max) return;
    this.credit += 1;
    if (this.credit >= this.current) {
      this.credit = 0;
      this.current += 1;
      this.options.onChange?.(this.current, 'increase');
    }
  }

  /** The API answered 429. */
  onRateLimited(): void {
    this.decrease('rate_limited');
  }

  private decrease(reason: 'rate_limited' | 'slow'): void {
    const now = this.now();
    if (now - this.lastDecreaseAt < this.cooldownMs) return;
    this.lastDecreaseAt = now;
    this.credit = 0;
    const next = Math.max(1, Math.floor(this.current / 2));
    if (next === this.current) return;
    this.current = next;
    this.options.onChange?.(this.current, reason);
  }
}
