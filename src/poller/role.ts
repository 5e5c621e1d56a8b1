import { Queue, Worker } from 'bullmq';
import { QUEUE_NAMES, queueOptions } from '../redis/keys.js';
import { openRoleResources } from '../runtime/resources.js';
import { within } from '../time/deadline.js';
import { roleOf, type Role, type RoleOptions } from '../runtime/role.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { runTick, type TickResult } from './tick.js';

/** How often a poller upserts the job scheduler again (see `startPoller`). */
const RESCHEDULE_MS = 10_000;

/** The id of the one job scheduler every poller process upserts. */
export const POLL_SCHEDULER_ID = 'poll-tick';

/** A tick Worker is wedged when no tick started for this many intervals... */
const WEDGED_AFTER_TICKS = 6;
/** ...and at least this long, while one is pending (see {@link tickWorkerWedged}). */
const WEDGED_AFTER_MS = 30_000;
/** How long a wedged Worker's forced close is waited for. */
const FORCE_CLOSE_MS = 1_000;

/** What the poll queue shows of its ticks, whoever runs them. */
export interface QueueTicks {
  /** A tick is pending (waiting or delayed), and the queue is not paused by an operator. */
  readonly pending: boolean;
  /** When the latest tick any poller ran started or ended; undefined when none is recorded. */
  readonly lastAt: number | undefined;
}

/**
 * Whether a poller's tick Worker is wedged: none of its ticks started for `stalledMs`, nor any of
 * the fleet's (other pollers would take them: then it is left alone), while a tick is pending. A
 * queue with no tick pending is left to the scheduler's upsert; a paused one, to its operator.
 */
export function tickWorkerWedged(
  now: number,
  lastTickAt: number,
  queue: QueueTicks,
  stalledMs: number,
): boolean {
  return (
    queue.pending &&
    now - lastTickAt >= stalledMs &&
    (queue.lastAt === undefined || now - queue.lastAt >= stalledMs)
  );
}

/**
 * Reads {@link QueueTicks}. The scheduler's pending tick is no clock: every upsert (each
 * RESCHEDULE_MS) adds it again, due anew.
 */
async function queueTicks(pollQueue: Queue): Promise<QueueTicks> {
  const [paused, waiting, delayed, active, completed, failed] = await Promise.all([
    pollQueue.isPaused(),
    pollQueue.getWaitingCount(),
    pollQueue.getDelayedCount(),
    pollQueue.getActive(0, 0),
    pollQueue.getCompleted(0, 0),
    pollQueue.getFailed(0, 0),
  ]);
  const times = [...active, ...completed, ...failed].flatMap((job) => [
    job.processedOn ?? 0,
    job.finishedOn ?? 0,
  ]);
  const lastAt = Math.max(0, ...times);
  return { pending: !paused && waiting + delayed > 0, lastAt: lastAt > 0 ? lastAt : undefined };
}

/** The poller's options: a role's, and the watchdog's timing (tests shorten it). */
export interface PollerOptions extends RoleOptions {
  readonly watchdog?: {
    /** How often the scheduler is upserted again and the tick Worker checked. */
    readonly everyMs: number;
    /** How long without a tick makes the Worker wedged (see {@link tickWorkerWedged}). */
    readonly afterMs: number;
  };
}

/**
 * Starts the poller role: a BullMQ job scheduler ticks every `POLL_INTERVAL`, and a worker of
 * concurrency 1 runs the ticks. Every poller process upserts the same scheduler (one pending tick
 * at a time) and a Redis lock keeps ticks from overlapping, so any number may run. `close` stops
 * after the running tick, within the shutdown deadline.
 */
export function startPoller(options: PollerOptions): Role {
  const { config } = options;
  const logger = options.logger.child({ role: 'poller' });
  const ctx = openRoleResources('poller', { ...options, logger });
  const pollQueue = new Queue(QUEUE_NAMES.poll, {
    connection: ctx.redis,
    ...queueOptions(config.prefix),
  });
  pollQueue.on('error', (err) => logger.warn({ err }, LIFECYCLE.redisError));

  // The Worker that runs the ticks, made again by the watchdog below when it is wedged.
  let lastTickAt = Date.now();
  const tickWorker = (): Worker => {
    const made: Worker = new Worker(
      QUEUE_NAMES.poll,
      (): Promise<TickResult> => runTick(ctx, () => made.closing !== undefined),
      {
        connection: ctx.workerRedis,
        prefix: config.prefix,
        concurrency: 1,
        // A tick that dies with its process is simply not rerun: the next tick reads the same due
        // set.
        maxStalledCount: 0,
        removeOnComplete: { count: 100 },
        removeOnFail: { count: 100 },
      },
    );
    made.on('error', (err) => logger.error({ err }, LIFECYCLE.redisError));
    made.on('failed', (_job, err) => logger.error({ err }, LIFECYCLE.pollError));
    made.on('active', () => {
      lastTickAt = Date.now();
    });
    return made;
  };
  let worker = tickWorker();
  let closing = false;
  const schedule = () =>
    pollQueue
      .upsertJobScheduler(
        POLL_SCHEDULER_ID,
        { every: config.pollIntervalMs },
        { name: 'tick', opts: { removeOnComplete: 100, removeOnFail: 100 } },
      )
      .catch((err: unknown) => logger.error({ err }, LIFECYCLE.pollError));
  const scheduled = schedule();
  // A tick Worker that wedges for good (its blocking connection's reset awaited an ioredis
  // connect that never settled, until redis/connections.ts made it settle) leaves ticks falling
  // due that nobody takes. Seen wedged, it is forced closed and made again, whatever wedged it.
  const { everyMs, afterMs } = options.watchdog ?? {
    everyMs: RESCHEDULE_MS,
    afterMs: Math.max(WEDGED_AFTER_TICKS * config.pollIntervalMs, WEDGED_AFTER_MS),
  };
  const watch = async () => {
    // A Worker that took a tick lately is not wedged: the queue is read only when it did not.
    if (closing || Date.now() - lastTickAt < afterMs) return;
    const ticks = await queueTicks(pollQueue).catch(() => undefined);
    const now = Date.now();
    if (closing || !ticks || !tickWorkerWedged(now, lastTickAt, ticks, afterMs)) return;
    logger.warn(
      { lastTickMs: now - lastTickAt, fleetLastTickMs: now - (ticks.lastAt ?? lastTickAt) },
      LIFECYCLE.pollWorkerRestarted,
    );
    const wedged = worker;
    worker = tickWorker();
    lastTickAt = now;
    // A wedged Worker's close may never end: it is not waited for past FORCE_CLOSE_MS.
    void within(wedged.close(true), FORCE_CLOSE_MS, () => undefined).catch(() => undefined);
  };
  // A Redis (or a cluster master) that restarted without its data forgot the scheduler: upserting
  // it again now and then (while it exists, BullMQ only adds its pending tick anew) restarts the
  // ticks without a poller restart. The watchdog looks at the same pace.
  const reschedule = setInterval(() => {
    void schedule();
    void watch();
  }, everyMs);
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
    worker: {
      isRunning: () => worker.isRunning(),
      close(force) {
        closing = true;
        return worker.close(force);
      },
    },
    starting: scheduled,
    after: [async () => clearInterval(reschedule), () => pollQueue.close(), () => ctx.close()],
  });
}
