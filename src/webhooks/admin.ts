import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import { connect } from '../redis/connections.js';
import { queueOptions, WEBHOOK_QUEUE, webhookPendingKey } from '../redis/keys.js';
import { shardsOf } from '../runtime/shards.js';
import { deliverySchema } from './deliveries.js';
import { ensureGroup } from './fan-out.js';
import {
  SubscriptionStore,
  viewOf,
  type Subscription,
  type SubscriptionView,
} from './subscriptions.js';
import { InvalidWebhookError } from './errors.js';
export { InvalidWebhookError } from './errors.js';

/**
 * The operator's webhook controls, one code for the CLI (`webhook ...`) and the HTTP routes
 * (`/v1/webhooks`): add, list and remove subscriptions, list and redrive the dead letters.
 */

/** One dead letter: a delivery that ran out of `WEBHOOK_MAX_AGE`. */
export interface DeadDelivery {
  readonly webhookId: string;
  readonly subscription: string;
  readonly dispatchId: string;
  readonly projectId: string;
  readonly type: string;
  readonly shard: number;
  readonly attempts: number;
  /** Why its last attempt failed. */
  readonly reason: string;
  readonly queuedAt: string;
  readonly deadAt: string | null;
}

/** What to add. */
export interface NewSubscription {
  readonly url: unknown;
  readonly projects?: unknown;
  readonly types?: unknown;
}

/** The webhook controls. */
export interface WebhookAdmin {
  /** Adds a subscription; the answer holds its secret, shown this once. */
  add(input: NewSubscription): Promise<Subscription>;
  list(): Promise<SubscriptionView[]>;
  /** Resolves to whether it existed; the static one (`WEBHOOK_URL`) cannot be removed here. */
  remove(id: string): Promise<boolean>;
  /** The dead letters of every shard, oldest first, at most `limit` per shard. */
  dead(limit?: number): Promise<DeadDelivery[]>;
  /** Queues every dead letter (of `subscription` only, when given) again, with a new max age. */
  redrive(subscription?: string): Promise<{ redriven: number }>;
  close(): Promise<void>;
}

/** The webhook controls of `config`'s deployment, on `redis` (owned by the caller) or its own. */
export function webhookAdminFor(config: Config, redis?: Redis): WebhookAdmin {
  const connection = redis ?? connect(config, 'worker', 'webhook-admin');
  if (!redis) connection.on('error', () => undefined); // Reaches the caller as a rejected call.
  const store = new SubscriptionStore(connection, config);
  const shards = shardsOf(config);
  const queues = shards.map(
    (shard) => new Queue(WEBHOOK_QUEUE, { connection, ...queueOptions(shard.prefix) }),
  );
  for (const queue of queues) queue.on('error', () => undefined);
  const failedJobs = async (limit: number) =>
    (await Promise.all(queues.map((q) => q.getFailed(0, limit - 1)))).map((jobs) =>
      jobs.filter((job): job is Job => job !== undefined),
    );
  return {
    async add(input) {
      const subscription = await store.add(checkedInput(input));
      // Made now, so the events published from now on wait for a deliverer in the group.
      await Promise.all(shards.map((shard) => ensureGroup(connection, shard.eventsStream)));
      return subscription;
    },
    list: async () => (await store.all()).map(viewOf),
    async remove(id) {
      if (config.webhookUrl && (await store.all()).some((s) => s.id === id && s.kind === 'static'))
        throw new InvalidWebhookError(
          'id',
          'is the static subscription of WEBHOOK_URL: unset WEBHOOK_URL instead',
        );
      return store.remove(id);
    },
    async dead(limit = 1_000) {
      const byShard = await failedJobs(limit);
      return byShard.flatMap((jobs, shard) => jobs.map((job) => deadOf(job, shard)));
    },
    redrive: async (subscription) =>
      redrive(
        connection,
        shards.map((shard) => shard.prefix),
        await failedJobs(100_000),
        subscription,
      ),
    async close() {
      await Promise.all(queues.map((q) => q.close().catch(() => undefined)));
      if (!redis) connection.disconnect();
    },
  };
}

/**
 * Queues dead letters again (those of `subscription` only, when given): each gets a new max age
 * from now, its attempts counted anew, and its place in the pending set back; its id, and so its
 * `webhook-id`, stay.
 */
async function redrive(
  connection: Redis,
  shardPrefixes: readonly string[],
  byShard: readonly Job[][],
  subscription: string | undefined,
): Promise<{ redriven: number }> {
  let redriven = 0;
  for (const [shard, jobs] of byShard.entries()) {
    for (const job of jobs) {
      const data = deliverySchema.safeParse(job.data);
      if (!data.success || (subscription && data.data.subscription !== subscription)) continue;
      const now = Date.now();
      await job.updateData({ ...data.data, since: now });
      await connection.zadd(webhookPendingKey(shardPrefixes[shard] ?? ''), now, job.id ?? '');
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      redriven++;
    }
  }
  return { redriven };
}

/** The URL and filters of a new subscription, checked; {@link InvalidWebhookError} names a bad one. */
function checkedInput(input: NewSubscription): {
  url: string;
  projects: string[];
  types: string[];
} {
  const { url } = input;
  if (typeof url !== 'string' || !URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
    throw new InvalidWebhookError('url', 'expected an http:// or https:// URL');
  return {
    url,
    projects: strings('projects', input.projects),
    types: strings('types', input.types),
  };
}

function strings(field: string, value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string' && v.trim() !== ''))
    throw new InvalidWebhookError(field, 'expected a list of non-empty strings');
  return value as string[];
}

function deadOf(job: Job, shard: number): DeadDelivery {
  const data = deliverySchema.safeParse(job.data).data;
  return {
    webhookId: job.id ?? '',
    subscription: data?.subscription ?? '',
    dispatchId: data?.dispatchId ?? '',
    projectId: data?.projectId ?? '',
    type: data?.type ?? job.name,
    shard,
    attempts: job.attemptsMade,
    reason: job.failedReason,
    queuedAt: new Date(data?.since ?? job.timestamp).toISOString(),
    deadAt: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}
