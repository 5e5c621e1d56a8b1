import { createHash, createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signing: the secret's form (`whsec_` + base64), the `webhook-id` of a delivery
 * and the `webhook-signature` header, `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
 */

/** The prefix Standard Webhooks gives a signing secret. */
export const SECRET_PREFIX = 'whsec_';

/** Bytes of a generated secret: the spec asks for 24 to 64. */
const SECRET_BYTES = 32;

/** A new signing secret, `whsec_` + base64 of 32 random bytes. */
export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The HMAC key of a secret: the base64-decoded part after `whsec_`. */
export function secretKey(secret: string): Buffer {
  const text = secret.trim();
  return Buffer.from(
    text.startsWith(SECRET_PREFIX) ? text.slice(SECRET_PREFIX.length) : text,
    'base64',
  );
}

/** The `webhook-signature` header of `body` sent as `webhookId` at `timestamp` (Unix seconds). */
export function signature(
  secret: string,
  webhookId: string,
  timestamp: number,
  body: string,
): string {
  const mac = createHmac('sha256', secretKey(secret))
    .update(`${webhookId}.${timestamp}.${body}`, 'utf8')
    .digest('base64');
  return `v1,${mac}`;
}

/**
 * The `webhook-id` of the delivery of one follow-up's event to one subscription, also its BullMQ
 * job id. It is derived from the dispatch id (one event per follow-up), not from the stream entry,
 * so it stays the same across retries, a redrive, and an event published again after a Redis
 * crash: a receiver de-duplicates on it. Hashed, since a dispatch id may hold characters a BullMQ
 * job id may not (`:`).
 */
export function webhookId(subscriptionId: string, dispatchId: string): string {
  const digest = createHash('sha256').update(dispatchId, 'utf8').digest('hex').slice(0, 32);
  return `msg_${subscriptionId}_${digest}`;
}
