import { Queue, Worker } from 'bullmq';
import type { AgentApiClient } from '../agent-api/index.js';
import type { Config } from '../config/index.js';
import { closeWorkerWithin, openRoleResources } from '../dispatch/resources.js';
import { QUEUE_NAMES } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { runTick } from './tick.js';

/** The id of the one job scheduler every poller process upserts. */
export const POLL_SCHEDULER_ID = 'poll-tick';

/** A running poller, as the CLI and `/readyz` see it. */
export interface PollerRole {
  readonly name: string;
  running(): boolean;
  /** Stops after the running tick, within the shutdown deadline; idempotent. */
  close(): Promise<void>;
}

/** What the poller needs; `api` may be given (tests), otherwise it is built from `config`. */
export interface PollerOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly api?: AgentApiClient;
}

/**
 * Starts the poller role: a BullMQ job scheduler ticks every `POLL_INTERVAL`, and a worker of
 * concurrency 1 runs the ticks. Every poller process upserts the same scheduler (one pending tick
 * at a time) and a Redis lock keeps ticks from overlapping, so any number may run.
 */
export function startPoller(options: PollerOptions): PollerRole {
  const { config, metrics } = options;
  const logger = options.logger.child({ role: 'poller' });
  const resources = openRoleResources('poller', config, logger, options.api);
  const { store, api, queue: dispatchQueue, redis, workerRedis, refreshKey } = resources;
  const pollQueue = new Queue(QUEUE_NAMES.poll, { connection: redis, prefix: config.prefix });
  pollQueue.on('error', (err) => logger.warn({ err }, LIFECYCLE.redisError));

  const ctx = { config, store, api, queue: dispatchQueue, metrics, logger, refreshKey };
  const worker = new Worker(QUEUE_NAMES.poll, () => runTick(ctx), {
    connection: workerRedis,
    prefix: config.prefix,
    concurrency: 1,
    // A tick that dies with its process is simply not rerun: the next tick reads the same due set.
    maxStalledCount: 0,
    removeOnComplete: { count: 100 },
    removeOnFail: { count: 100 },
  });
  worker.on('error', (err) => logger.error({ err }, LIFECYCLE.redisError));
  worker.on('failed', (_job, err) => logger.error({ err }, LIFECYCLE.pollError));
  const scheduled = pollQueue
    .upsertJobScheduler(
      POLL_SCHEDULER_ID,
      { every: config.pollIntervalMs },
      { name: 'tick', opts: { removeOnComplete: 100, removeOnFail: 100 } },
    )
    .catch((err: unknown) => logger.error({ err }, LIFECYCLE.pollError));
  logger.info({ pollIntervalMs: config.pollIntervalMs }, LIFECYCLE.roleStarted);

  let closing: Promise<void> | undefined;
  return {
    name: 'poller',
    running: () => !closing && worker.isRunning(),
    close() {
      closing ??= (async () => {
        logger.info({ deadlineMs: config.shutdownTimeoutMs }, LIFECYCLE.roleStopping);
        await scheduled;
        const timedOut = await closeWorkerWithin(worker, config.shutdownTimeoutMs);
        await pollQueue.close().catch(() => {});
        await resources.close();
        logger.info({ timedOut }, LIFECYCLE.roleStopped);
      })();
      return closing;
    },
  };
}
