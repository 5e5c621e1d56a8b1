import { Agent, request } from 'undici';
import { signature } from './signature.js';
import type { Subscription } from './subscriptions.js';
import { WebhookAttemptError } from './errors.js';
export { WebhookAttemptError } from './errors.js';

/**
 * One delivery attempt: a signed POST with undici through the process's one dispatcher, and what
 * its answer means. Redirects are never followed (undici follows none without its redirect
 * interceptor): a 3xx is a failed attempt, so a receiver cannot bounce a signed event elsewhere.
 * undici never retries either; the delivery queue's backoff owns every retry.
 */

/** What an attempt came to: any 2xx delivers; 410 Gone asks for no more deliveries. */
export type AttemptOutcome = 'delivered' | 'gone';

/** The one undici dispatcher of a process's deliveries, with connect, headers and body timeouts. */
export function webhookDispatcher(timeoutMs: number): Agent {
  return new Agent({
    connect: { timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connections: 32,
  });
}

/** What one attempt sends. */
export interface AttemptInput {
  readonly subscription: Subscription;
  readonly webhookId: string;
  readonly body: string;
  readonly timeoutMs: number;
}

/**
 * POSTs `body` to the subscription's URL with the Standard Webhooks headers, signed now. Resolves
 * to its outcome, or rejects with {@link WebhookAttemptError}. The answer's body is always read
 * to its end (up to the timeout) and dropped, so the connection is reused.
 */
export async function attempt(dispatcher: Agent, input: AttemptInput): Promise<AttemptOutcome> {
  const timestamp = Math.floor(Date.now() / 1000);
  const { subscription, webhookId, body } = input;
  let status: number;
  try {
    const response = await request(subscription.url, {
      dispatcher,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'agent-dispatch-webhooks/1',
        'webhook-id': webhookId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signature(subscription.secret, webhookId, timestamp, body),
      },
      body,
      signal: AbortSignal.timeout(input.timeoutMs),
    });
    status = response.statusCode;
    await response.body.dump().catch(() => undefined);
  } catch (err) {
    // The message names the failure's code, never the URL (it may hold a token of the receiver).
    const code = (err as { code?: unknown }).code;
    const name = typeof code === 'string' ? code : (err as Error).name;
    throw new WebhookAttemptError(`no answer: ${name}`, undefined, { cause: err });
  }
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 410) return 'gone';
  throw new WebhookAttemptError(`answered ${status}`, status);
}
