import { hostname } from 'node:os';
import { Worker, type Job, type Queue } from 'bullmq';
import type { AgentApiClient } from '../agent-api/index.js';
import type { Config } from '../config/index.js';
import { EVENT_TYPES } from '../dispatch/event.js';
import type { DispatchJobData } from '../dispatch/queue.js';
import { closeWorkerWithin, openRoleResources } from '../dispatch/resources.js';
import type { DispatchStore } from '../dispatch/store.js';
import { wakeDispatch } from '../dispatch/wake.js';
import { QUEUE_NAMES } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { ConcurrencyController } from './concurrency.js';
import { createProcessor } from './send.js';

/** A running role, as the CLI and `/readyz` see it. */
export interface ConsumerRole {
  readonly name: string;
  running(): boolean;
  /** Stops gracefully within the shutdown deadline; idempotent (the same promise). */
  close(): Promise<void>;
}

/** What the consumer needs; `api` may be given (tests), otherwise it is built from `config`. */
export interface ConsumerOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly api?: AgentApiClient;
}

/**
 * Starts the consumer role: a BullMQ Worker that sends follow-ups. Run as many processes as
 * needed; the per-project budget and the lanes live in Redis, so they hold across all of them.
 */
export function startConsumer(options: ConsumerOptions): ConsumerRole {
  const { config, metrics } = options;
  const workerId = `${hostname()}:${process.pid}`;
  const logger = options.logger.child({ role: 'worker', workerId });
  const { store, api, queue, workerRedis, refreshKey, ...resources } = openRoleResources(
    'worker',
    config,
    logger,
    options.api,
  );
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
    config,
    store,
    api,
    queue,
    metrics,
    logger,
    concurrency,
    workerId,
    refreshKey,
  });
  let inFlight = 0;
  const worker = new Worker<DispatchJobData, string>(
    QUEUE_NAMES.dispatch,
    async (job, token) => {
      metrics.inFlight.set({ worker: workerId }, ++inFlight);
      try {
        return await processJob(job, token);
      } finally {
        metrics.inFlight.set({ worker: workerId }, --inFlight);
      }
    },
    {
      connection: workerRedis,
      prefix: config.prefix,
      concurrency: concurrency.limit,
      // A job whose worker died is run again; the rerun reads the dispatch record first and never
      // resends blindly. More than 10 deaths on one job is a crash loop: it fails, and ends
      // undeliverable below.
      maxStalledCount: 10,
      lockDuration: config.stalledTimeoutMs,
      stalledInterval: config.stalledTimeoutMs,
    },
  );
  worker.on('error', (err) => logger.error({ err }, LIFECYCLE.redisError));
  worker.on('failed', (job, err) => {
    if (job) void onFailed(store, queue, metrics, logger, job, err);
  });
  logger.info(
    { concurrency: concurrency.limit, rate: config.sendRateLimit },
    LIFECYCLE.roleStarted,
  );

  let closing: Promise<void> | undefined;
  return {
    name: 'worker',
    running: () => !closing && worker.isRunning(),
    close() {
      closing ??= shutdown();
      return closing;
    },
  };

  async function shutdown(): Promise<void> {
    logger.info({ deadlineMs: config.shutdownTimeoutMs }, LIFECYCLE.roleStopping);
    const timedOut = await closeWorkerWithin(worker, config.shutdownTimeoutMs);
    await resources.close();
    logger.info({ timedOut }, LIFECYCLE.roleStopped);
  }
}

/**
 * A BullMQ job failed. Most failures are retried by BullMQ; when this one is final (attempts
 * spent, or stalled too often), its dispatch must still end with one event.
 */
async function onFailed(
  store: DispatchStore,
  queue: Queue,
  metrics: Metrics,
  logger: Logger,
  job: Job<DispatchJobData>,
  err: Error,
): Promise<void> {
  try {
    if ((await job.getState()) !== 'failed') return;
    const record = await store.get(job.data.dispatchId);
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
    const { finished, nextDispatchId } = await store.finish(
      record,
      { type: EVENT_TYPES.undeliverable, reason },
      'queued',
    );
    if (finished) metrics.eventsPublished.inc({ type: EVENT_TYPES.undeliverable });
    if (nextDispatchId) await wakeDispatch(queue, nextDispatchId);
  } catch (error) {
    logger.error({ err: error, dispatchId: job.data?.dispatchId }, LIFECYCLE.followupFinished);
  }
}
