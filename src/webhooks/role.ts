import { hostname } from 'node:os';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Config } from '../config/index.js';
import { queueOptions, WEBHOOK_QUEUE, webhookPendingKey } from '../redis/keys.js';
import { roleOf, type Role } from '../runtime/role.js';
import { servedShards } from '../runtime/shards.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE, WEBHOOK_NAMES } from '../telemetry/names.js';
import { attempt, type AttemptOutcome } from './attempt.js';
import { retryDelayMs } from './backoff.js';
import { deliverySchema, WEBHOOK_BACKOFF } from './deliveries.js';
import { startFanOut } from './fan-out.js';
import { openDeliverer, type Deliverer, type OpenDeliverer } from './deliverer.js';

/**
 * The webhook deliverer, a role of its own that `poller` and `start` run beside theirs: the
 * fan-out of every served shard's events into its delivery queue, and a BullMQ Worker per shard
 * that sends them. It has its own connections and never touches a budget, lane or lock of the
 * send path. Any number may run: the consumer group gives each event to one fan-out, BullMQ's
 * locks give each delivery to one Worker at a time.
 */

/** What the deliverer needs; tests shorten `claimIdleMs`. */
export interface WebhookRoleOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** How long a dead deliverer's events wait before another takes them. @defaultValue 30000 */
  readonly claimIdleMs?: number;
}

/** Deliveries in flight per shard and process. */
const CONCURRENCY = 8;

/** Starts the deliverer of this process's shards (`SHARDS`). */
export function startWebhooks(options: WebhookRoleOptions): Role {
  const { config } = options;
  const logger = options.logger.child({ role: 'webhooks' });
  const shards = servedShards(config);
  const deliverer = openDeliverer(config, logger, options.metrics.registry);
  const { redis } = deliverer;
  deliverer.metrics.watch({ redis, shardPrefixes: shards.map((s) => s.prefix) });
  const queues = shards.map((shard) => {
    const queue = new Queue(WEBHOOK_QUEUE, { connection: redis, ...queueOptions(shard.prefix) });
    queue.on('error', (err) => logger.warn({ err }, LIFECYCLE.redisError));
    return queue;
  });
  const workers = shards.map((shard) => deliveryWorker(deliverer, shard.prefix));
  const fanOut = startFanOut({
    redis,
    shards: shards.map((shard, i) => ({ ...shard, queue: queues[i] as Queue })),
    subscriptions: deliverer.subscriptions.get,
    consumer: `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    claimIdleMs: options.claimIdleMs ?? 30_000,
    logger,
  });
  logger.info(
    { shards: shards.length, static: config.webhookUrl !== undefined },
    WEBHOOK_NAMES.started,
  );
  return roleOf({
    name: 'webhooks',
    config,
    logger,
    worker: {
      isRunning: () => workers.every((w) => w.isRunning()),
      close: async (force) => void (await Promise.all(workers.map((w) => w.close(force)))),
    },
    after: [
      () => fanOut.stop(),
      async () => void (await Promise.all(queues.map((q) => q.close()))),
      () => deliverer.close(),
    ],
  });
}

/** The BullMQ Worker that sends one shard's deliveries. */
function deliveryWorker(deliverer: OpenDeliverer, prefix: string): Worker {
  const { config, logger } = deliverer;
  const pending = webhookPendingKey(prefix);
  const worker = new Worker(WEBHOOK_QUEUE, (job: Job) => deliver(deliverer, pending, job), {
    connection: deliverer.workerRedis,
    prefix,
    concurrency: CONCURRENCY,
    // A deliverer that dies mid-attempt leaves a stalled job: it is delivered again (at least
    // once), never dead-lettered for it.
    maxStalledCount: 1_000,
    settings: {
      backoffStrategy: (attemptsMade, type, _err, job) => {
        if (type !== WEBHOOK_BACKOFF) return 0;
        const since = deliverySchema.shape.since.safeParse(job?.data?.since);
        return retryDelayMs(attemptsMade, since.data ?? 0, config.webhookMaxAgeMs, Date.now());
      },
    },
  });
  worker.on('error', (err) => logger.error({ err }, LIFECYCLE.redisError));
  worker.on('failed', (job, err) => {
    // Each failed attempt emits this; only the last one leaves the job finished: the dead letter.
    if (!job?.finishedOn) return;
    deliverer.metrics.deliveries.inc({ outcome: 'dead' });
    logger.warn(
      { webhookId: job.id, attempts: job.attemptsMade, reason: err.message },
      WEBHOOK_NAMES.dead,
    );
    void deliverer.redis.zrem(pending, job.id ?? '').catch(() => undefined);
  });
  return worker;
}

/** Sends one delivery; resolves to what became of it, or throws for a retry. */
async function deliver(
  deliverer: Deliverer,
  pending: string,
  job: Job,
): Promise<AttemptOutcome | 'dropped'> {
  const parsed = deliverySchema.safeParse(job.data);
  if (!parsed.success) throw new UnrecoverableError('not a webhook delivery');
  const data = parsed.data;
  const webhookId = job.id ?? '';
  const log = deliverer.logger.child({ webhookId, subscription: data.subscription });
  const subscription = await deliverer.subscriptions.find(data.subscription);
  let outcome: AttemptOutcome | 'dropped' = 'dropped';
  if (subscription && !subscription.disabledAt) {
    try {
      outcome = await attempt(deliverer.dispatcher, {
        subscription,
        webhookId,
        body: data.body,
        timeoutMs: deliverer.config.webhookTimeoutMs,
      });
    } catch (err) {
      deliverer.metrics.deliveries.inc({ outcome: 'failed' });
      log.info({ err, attempt: job.attemptsMade + 1 }, WEBHOOK_NAMES.failed);
      if (Date.now() >= data.since + deliverer.config.webhookMaxAgeMs)
        throw new UnrecoverableError(`${(err as Error).message}; WEBHOOK_MAX_AGE has passed`);
      throw err;
    }
    deliverer.metrics.deliveries.inc({ outcome });
    if (outcome === 'gone') {
      await deliverer.subscriptions.disable(subscription);
      log.warn({ origin: new URL(subscription.url).origin }, WEBHOOK_NAMES.disabled);
    } else log.debug({ type: data.type }, WEBHOOK_NAMES.delivered);
  }
  await deliverer.redis.zrem(pending, webhookId);
  return outcome;
}
