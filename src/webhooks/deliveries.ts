import type { JobsOptions, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { webhookPendingKey } from '../redis/keys.js';
import type { WebhookEvent } from './events.js';
import { webhookId } from './signature.js';
import type { Subscription } from './subscriptions.js';

/**
 * The delivery queue's jobs: one BullMQ job per event and subscription, whose id is the
 * `webhook-id`, so that adding one twice (a fan-out rerun after a crash) adds nothing while the
 * first is kept. BullMQ owns the retries (backoff `webhook`, see backoff.ts), the locks that keep
 * two deliverers from sending one delivery at once, and the failed set: the dead letters.
 */

/** A delivery job's data. `since` restarts the max age (a redrive sets it anew). */
export const deliverySchema = z.object({
  subscription: z.string(),
  dispatchId: z.string(),
  projectId: z.string(),
  type: z.string(),
  body: z.string(),
  since: z.number(),
});

export type Delivery = z.infer<typeof deliverySchema>;

/** The name of the custom backoff of delivery jobs (the deliverer's Worker computes it). */
export const WEBHOOK_BACKOFF = 'webhook';

/**
 * Options of every delivery job. Attempts are not what ends a delivery (its max age is: the
 * backoff answers -1), so their count is only a bound far beyond it. A delivered job is kept an
 * hour, long enough that a fan-out rerun after a crash finds it and adds nothing; a dead one is
 * kept until it is redriven.
 */
export const DELIVERY_JOB_OPTIONS: JobsOptions = {
  attempts: 10_000,
  backoff: { type: WEBHOOK_BACKOFF },
  removeOnComplete: { age: 3_600 },
  removeOnFail: false,
};

/** One delivery to add: the event to one subscription. */
export interface NewDelivery {
  readonly subscription: Subscription;
  readonly event: WebhookEvent;
}

/**
 * Adds deliveries to a shard's queue, first noting each in the shard's pending set (scored by its
 * queue time, for the age gauge), so that none is ever queued without being counted.
 */
export async function addDeliveries(
  queue: Queue,
  redis: Redis,
  shardPrefix: string,
  deliveries: readonly NewDelivery[],
  nowMs: number,
): Promise<void> {
  if (deliveries.length === 0) return;
  const jobs = deliveries.map(({ subscription, event }) => {
    const data: Delivery = {
      subscription: subscription.id,
      dispatchId: event.dispatchId,
      projectId: event.projectId,
      type: event.type,
      body: event.body,
      since: nowMs,
    };
    const jobId = webhookId(subscription.id, event.dispatchId);
    return { name: event.type, data, opts: { ...DELIVERY_JOB_OPTIONS, jobId } };
  });
  // NX: a delivery added again keeps its first queue time.
  await redis.zadd(
    webhookPendingKey(shardPrefix),
    'NX',
    ...jobs.flatMap((job) => [nowMs, job.opts.jobId]),
  );
  await queue.addBulk(jobs);
}
