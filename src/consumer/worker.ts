import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { DelayedError, Worker, type Job } from 'bullmq';
import { QUEUE_NAMES } from '../redis/keys.js';
import { isConnectionError } from '../redis/connections.js';
import { budgetRate } from '../dispatch/budget.js';
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
import { reportItemError, STORE_ITEM_RECHECK_MS } from '../runtime/store-item-error.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { inProcessSpan } from '../telemetry/tracing.js';
import { sleep } from '../time/deadline.js';
import { jitteredUntil } from '../time/jitter.js';
import { ConcurrencyController } from './concurrency.js';
import { onFailed, park, poison } from './endings.js';
import { sendFollowUp, type SendContext } from './send.js';
import { afterVerdict } from './verdicts.js';

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
 * ACQUIRE is retried this many times after a connection error, `ACQUIRE_BACKOFF_MS` doubling:
 * with its attempt token a second run answers `go` again, spending nothing.
 */
const ACQUIRE_RETRIES = 4;
const ACQUIRE_BACKOFF_MS = 100;
/** Runs `command`, again after a connection error, a few times with a short backoff. */
export async function retryOnConnectionError<T>(command: () => Promise<T>): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await command();
    } catch (err) {
      if (retry >= ACQUIRE_RETRIES || !isConnectionError(err)) throw err;
      await sleep(ACQUIRE_BACKOFF_MS * 2 ** retry);
    }
  }
}

/**
 * Creates the BullMQ processor: one follow-up from ACQUIRE to its outcome. ACQUIRE decides, in
 * one script, whether the follow-up may go now (its lane, its project's park and budget, the
 * fleet's auth pause); `go` sends (`send.ts`), every other answer parks the job or ends it
 * (`verdicts.ts`).
 */
export function createProcessor(ctx: SendContext) {
  // SEND_RATE_LIMIT; a project's own limit, when the operator set one, replaces it in ACQUIRE.
  const { toleranceMs, ...rate } = budgetRate(ctx.config.sendRateLimit);

  /** `ref`: what the job's payload names (`readDispatchJob`); `undefined`: a poison job. */
  return async function runJob(
    job: Job<DispatchJobData>,
    ref: DispatchJobRef | undefined,
    token?: string,
    round = 0,
  ): Promise<string> {
    if (!ref) return poison(ctx, job, 'invalid_payload');
    // A fresh token per run: a retried or resent ACQUIRE of this run is answered `go` again, any
    // other run's (a rerun of a job thought stalled) `sending`.
    const attemptToken = randomUUID();
    // When the (last) ACQUIRE was asked for: its grant came later, so a write deadline counted
    // from here by this process's monotonic clock is never later than the one counted from it.
    let askedAt = 0;
    const verdict = await retryOnConnectionError(() => {
      askedAt = performance.now();
      return ctx.store.acquire(ref, rate, toleranceMs, ctx.config.pollMinIntervalMs, attemptToken);
    }).catch((err: unknown) => {
      // Its keys or stored values are broken (a limit out of range, a key of the wrong type): its
      // ACQUIRE wrote nothing, and it waits, unsent and not ended, until an operator repairs them.
      if (!reportItemError(ctx, err, ref)) throw err;
      return park(ctx, job, token, jitteredUntil(Date.now() + STORE_ITEM_RECHECK_MS));
    });
    if (verdict.kind !== 'go') {
      const again = () => runJob(job, ref, token, round + 1);
      return afterVerdict(ctx, { job, ref, token, round, again }, verdict);
    }
    ctx.metrics.projectSends.inc({ project: ref.projectId });
    return sendFollowUp(
      ctx,
      ref,
      { n: verdict.attempt, token: attemptToken },
      {
        prompt: verdict.prompt,
        to: verdict.to,
        probe: verdict.probe,
        writeBy: verdict.writeWithinMs === undefined ? undefined : askedAt + verdict.writeWithinMs,
      },
      job,
      token,
    );
  };
}
