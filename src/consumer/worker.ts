import { hostname } from 'node:os';
import { DelayedError, Worker, type Job } from 'bullmq';
import { QUEUE_NAMES } from '../redis/keys.js';
import { markSentRetryMs } from '../dispatch/in-flight.js';
import { DISPATCH_JOB_RETENTION, readDispatchJob, type DispatchJobData } from '../store/jobs.js';
import { openRoleResources } from '../runtime/resources.js';
import { roleOf, type Role, type RoleContext, type RoleOptions } from '../runtime/role.js';
import { endDispatch } from '../store/finish.js';
import { EVENT_TYPES } from '../dispatch/event.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { inProcessSpan } from '../telemetry/tracing.js';
import { createProcessor } from './acquire.js';
import { ConcurrencyController } from './concurrency.js';

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
    if (job) void onFailed(resources, job, err);
  });
  logger.info(
    { concurrency: concurrency.limit, rate: config.sendRateLimit },
    LIFECYCLE.roleStarted,
  );
  return roleOf({ name: 'worker', config, logger, worker, after: [() => resources.close()] });
}

/**
 * A BullMQ job failed. Most failures are retried by BullMQ; when this one is final (attempts
 * spent, or stalled too often), its dispatch must still end with one event.
 */
async function onFailed(ctx: RoleContext, job: Job<DispatchJobData>, err: Error): Promise<void> {
  const { store, logger } = ctx;
  const ref = readDispatchJob(job);
  try {
    if ((await job.getState()) !== 'failed') return;
    const record = ref && (await store.sends.get(ref.dispatchId));
    if (!record) return;
    if (record.state === 'sending') {
      // Its last attempt recorded an intent and no outcome: the prompt may have gone out. Marked
      // on that attempt's behalf (its token); the poller settles it from the job's status.
      logger.warn(
        { dispatchId: record.dispatchId, projectId: record.projectId, jobId: record.jobId },
        LIFECYCLE.followupAmbiguous,
      );
      await store.markSent(record, 'unsettled', undefined, 1_000, record.attemptToken ?? '');
      return;
    }
    if (record.state !== 'queued') return;
    const reason = `worker_failed:${err.name}`;
    await endDispatch(ctx, record, { type: EVENT_TYPES.undeliverable, reason }, 'queued');
  } catch (error) {
    logger.error({ err: error, dispatchId: ref?.dispatchId }, LIFECYCLE.followupEndFailed);
  }
}
