/**
 * The Redis keys and names of webhook delivery (src/webhooks/), re-exported by `keys.ts`, where
 * every other key is built.
 */

const bare = (name: string) => name.replace(/[{}]/g, '');

/**
 * The BullMQ queue of webhook deliveries, one per shard under the shard's prefix (so a delivery's
 * keys share the slot of the events it came from): one job per event and subscription.
 */
export const WEBHOOK_QUEUE = 'webhook';

/** The consumer group that fans each shard's completion events out to the webhook queue. */
export const WEBHOOK_GROUP = 'agent-dispatch:webhooks';

/**
 * Hash: the managed webhook subscriptions of a deployment (field: id; value: JSON with the URL,
 * the secret, the filters), and the disabled mark of the static one. One key for every shard: a
 * subscription is the deployment's, whatever shard an event comes from.
 */
export function webhookSubscriptionsKey(prefix: string): string {
  return `${bare(prefix)}:webhooks`;
}

/**
 * Sorted set of one shard: the webhook deliveries not delivered yet (member: the delivery's id,
 * score: when it was queued), whose lowest score gives the oldest undelivered event's age.
 */
export function webhookPendingKey(shardPrefix: string): string {
  return `${shardPrefix}:webhooks:pending`;
}
