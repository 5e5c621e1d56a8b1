import { Queue, Worker } from 'bullmq';
import { QUEUE_NAMES, queueOptions } from '../redis/keys.js';
import { openRoleResources } from '../runtime/resources.js';
import { roleOf, type Role, type RoleOptions } from '../runtime/role.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { runTick, type TickResult } from './tick.js';

/** How often a poller upserts the job scheduler again (see `startPoller`). */
const RESCHEDULE_MS = 10_000;

/** The id of the one job scheduler every poller process upserts. */
export const POLL_SCHEDULER_ID = 'poll-tick';

/**
 * Starts the poller role: a BullMQ job scheduler ticks every `POLL_INTERVAL`, and a worker of
 * concurrency 1 runs the ticks. Every poller process upserts the same scheduler (one pending tick
 * at a time) and a Redis lock keeps ticks from overlapping, so any number may run. `close` stops
 * after the running tick, within the shutdown deadline.
 */
export function startPoller(options: RoleOptions): Role {
  const { config } = options;
  const logger = options.logger.child({ role: 'poller' });
  const ctx = openRoleResources('poller', { ...options, logger });
  const pollQueue = new Queue(QUEUE_NAMES.poll, {
    connection: ctx.redis,
    ...queueOptions(config.prefix),
  });
  pollQueue.on('error', (err) => logger.warn({ err }, LIFECYCLE.redisError));

  const worker: Worker = new Worker(
    QUEUE_NAMES.poll,
    (): Promise<TickResult> => runTick(ctx, () => worker.closing !== undefined),
    {
      connection: ctx.workerRedis,
      prefix: config.prefix,
      concurrency: 1,
      // A tick that dies with its process is simply not rerun: the next tick reads the same due set.
      maxStalledCount: 0,
      removeOnComplete: { count: 100 },
      removeOnFail: { count: 100 },
    },
  );
  worker.on('error', (err) => logger.error({ err }, LIFECYCLE.redisError));
  worker.on('failed', (_job, err) => logger.error({ err }, LIFECYCLE.pollError));
  const schedule = () =>
    pollQueue
      .upsertJobScheduler(
        POLL_SCHEDULER_ID,
        { every: config.pollIntervalMs },
        { name: 'tick', opts: { removeOnComplete: 100, removeOnFail: 100 } },
      )
      .catch((err: unknown) => logger.error({ err }, LIFECYCLE.pollError));
  const scheduled = schedule();
  // A Redis (or a cluster master) that restarted without its data forgot the scheduler: upserting
  // it again now and then (a no-op while it exists) restarts the ticks without a poller restart.
  const reschedule = setInterval(() => void schedule(), RESCHEDULE_MS);
  reschedule.unref();
  // BullMQ adds a scheduler's next tick when a worker takes the current one. A Redis crash can
  // take that write back while the current tick's completion, resent by ioredis, survives: no
  // tick is pending any more, and none would ever run again. So every reconnect upserts again.
  ctx.redis.on('ready', () => void schedule());
  logger.info({ pollIntervalMs: config.pollIntervalMs }, LIFECYCLE.roleStarted);
  return roleOf({
    name: 'poller',
    config,
    logger,
    worker,
    starting: scheduled,
    after: [async () => clearInterval(reschedule), () => pollQueue.close(), () => ctx.close()],
  });
}
