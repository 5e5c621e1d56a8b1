import { z } from 'zod';
import { describeRoute } from './openapi.js';

/**
 * The OpenAPI description of `/v1/webhooks` (`webhooks.ts`). The body of `POST /v1/webhooks` is
 * checked by the webhook controls themselves (`webhooks/admin.ts`, shared with the CLI's
 * `webhook add`); the schema here says the same.
 */

const NewSubscription = z.object({
  url: z.string().describe('an http:// or https:// URL'),
  projects: z
    .array(z.string().min(1))
    .nullable()
    .optional()
    .describe('only events of these projects; every project when empty or absent'),
  types: z
    .array(z.string().min(1))
    .nullable()
    .optional()
    .describe('only events of these types (`followup.completed`, `followup.*`); all when empty'),
});

const SubscriptionView = z.looseObject({
  id: z.string(),
  url: z.string(),
  projects: z.array(z.string()),
  types: z.array(z.string()),
  createdAt: z.number().describe('epoch ms: it gets the events published from then on'),
  disabledAt: z.number().optional().describe("epoch ms of the receiver's 410 Gone"),
  kind: z.enum(['static', 'managed']),
});

const DeadDelivery = z.looseObject({
  webhookId: z.string(),
  subscription: z.string(),
  dispatchId: z.string(),
  projectId: z.string(),
  type: z.string(),
  shard: z.number(),
  attempts: z.number(),
  reason: z.string(),
  queuedAt: z.string(),
  deadAt: z.string().nullable(),
});

const unavailable = { description: 'Redis is unavailable; nothing changed, retry later' };

/** Describes the routes of `webhooks.ts`. */
export function describeWebhookRoutes(): void {
  describeRoute({
    method: 'post',
    path: '/v1/webhooks',
    scope: 'operator',
    summary: 'adds a webhook subscription; its secret is in this answer only',
    request: NewSubscription,
    responses: {
      201: {
        description: 'added, with its secret',
        schema: SubscriptionView.extend({ secret: z.string() }),
      },
      400: { description: 'invalid body; `problems` name the field' },
      413: { description: 'body over 16 KiB' },
      415: { description: 'not JSON' },
      503: unavailable,
    },
  });
  describeRoute({
    method: 'get',
    path: '/v1/webhooks',
    scope: 'operator',
    summary: 'the webhook subscriptions, without their secrets',
    responses: {
      200: { description: 'them', schema: z.object({ webhooks: z.array(SubscriptionView) }) },
      503: unavailable,
    },
  });
  describeRoute({
    method: 'delete',
    path: '/v1/webhooks/:id',
    scope: 'operator',
    summary: 'removes a managed webhook subscription',
    responses: {
      200: {
        description: 'removed',
        schema: z.object({ id: z.string(), removed: z.literal(true) }),
      },
      400: { description: "the static subscription (WEBHOOK_URL's): unset WEBHOOK_URL instead" },
      404: { description: 'no such subscription' },
      503: unavailable,
    },
  });
  describeDeadLetters();
}

function describeDeadLetters(): void {
  describeRoute({
    method: 'get',
    path: '/v1/webhooks/dead',
    scope: 'operator',
    summary: 'the dead letters: deliveries that ran out of WEBHOOK_MAX_AGE, oldest first',
    query: z.object({
      limit: z.number().int().min(1).optional().describe('most per shard (1000 when absent)'),
    }),
    responses: {
      200: { description: 'them', schema: z.object({ dead: z.array(DeadDelivery) }) },
      400: { description: 'a bad `limit`' },
      503: unavailable,
    },
  });
  describeRoute({
    method: 'post',
    path: '/v1/webhooks/redrive',
    scope: 'operator',
    summary: 'queues the dead letters again, with a new max age',
    query: z.object({
      subscription: z.string().optional().describe('only those of this subscription'),
    }),
    responses: {
      200: { description: 'how many', schema: z.object({ redriven: z.number() }) },
      503: unavailable,
    },
  });
}
