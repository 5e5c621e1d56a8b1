import { z } from 'zod';
import { followUpSchema } from '../dispatch/followup.js';
import { MAX_BATCH } from './intake.js';
import { describeEventRoutes } from './events-routes.js';
import { describeRoute } from './openapi.js';
import { describeRedriveRoutes } from './redrive-routes.js';
import { describeWebhookRoutes } from './webhook-routes.js';

/**
 * The OpenAPI description of the intake and the operator controls. The intake's body is the
 * producer's own schema (`followUpSchema`); the answers are the shapes the producer and admin
 * return (`DispatchStatus`, `PauseResult`...), written here as zod schemas.
 */

const SendResult = z.object({ dispatchId: z.string(), deduplicated: z.boolean() });
const Batch = (item: z.ZodType) => z.array(item).min(1).max(MAX_BATCH);

const DispatchStatus = z.looseObject({
  dispatchId: z.string(),
  projectId: z.string(),
  jobId: z.string().describe("the agent job; '' while a creation's is not known yet"),
  kind: z.enum(['create', 'followup']).describe('`create`: it creates an agent job'),
  after: z.string().nullable().describe('the creation a chained follow-up waits for'),
  key: z.string().nullable(),
  meta: z.record(z.string(), z.unknown()).nullable(),
  state: z.string(),
  type: z.string().nullable(),
  reason: z.string().nullable(),
  status: z.string().nullable(),
  prLink: z.string().nullable(),
  attempts: z.number(),
  enqueuedAt: z.string(),
  sentAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  expiresAt: z.string().nullable().describe('its deadline (`ttl` or `expiresAt`), null: none'),
  job: z.looseObject({}).nullable(),
  redriveOf: z.string().nullable().describe('the dead letter it redrives (a redrive made it)'),
  redrivenTo: z.string().nullable().describe('the follow-up that redrives it'),
});

const PauseResult = z.object({
  projectId: z.string(),
  paused: z.boolean(),
  changed: z.boolean(),
  woken: z.number(),
});

const ProjectView = z.looseObject({
  projectId: z.string(),
  paused: z.boolean(),
  pausedAt: z.string().nullable(),
  limit: z.string(),
  limitSource: z.enum(['project', 'default']),
  sendsInWindow: z.number(),
  reservedSlots: z.number(),
  nextSlotAt: z.string().nullable().describe('null: see `problem`'),
  parkedUntil: z.string().nullable(),
  queued: z.number(),
  sending: z.number(),
  tracked: z.number(),
  countsExact: z.boolean(),
  at: z.string(),
  problem: z.string().nullable().optional().describe('what is wrong with what Redis holds'),
});

const unavailable = { description: 'Redis is unavailable; retry later (Retry-After)' };

/** Describes every `/v1` route (`intake.ts`, `controls.ts`, events, webhooks); `createApp` calls it. */
export function describeCoreRoutes(promptMaxBytes: number): void {
  const single = followUpSchema(promptMaxBytes);
  const creation = single.omit({ jobId: true });
  // A follow-up names its agent job, or the creation it is chained to (`after`); or it is a
  // creation (`"create": true`, docs/creations.md).
  const followUp = z.union([
    single,
    creation.extend({
      after: z.string().describe('the creation it waits for: its dispatch id or idempotency key'),
    }),
    creation.extend({ create: z.literal(true).describe('creates an agent job with the prompt') }),
  ]);
  describeRoute({
    method: 'post',
    path: '/v1/followups',
    scope: 'intake',
    summary: 'enqueue one follow-up, an array of them, or {"followups": [...]}',
    request: z.union([followUp, Batch(followUp), z.strictObject({ followups: Batch(followUp) })]),
    responses: {
      202: {
        description: 'accepted: one result, or one per follow-up of a batch',
        schema: z.union([SendResult, z.object({ results: z.array(SendResult) })]),
      },
      400: { description: 'invalid follow-up; `problems` name the fields' },
      409: { description: 'the idempotency key was used for another follow-up' },
      413: { description: 'body over HTTP_BODY_MAX' },
      415: { description: 'not JSON, or not UTF-8' },
      429: {
        description:
          "a project's backlog is full (PROJECT_BACKLOG_MAX): nothing enqueued; retry after Retry-After",
      },
      503: { description: 'Redis unavailable, or too many bodies in flight (Retry-After)' },
    },
  });
  describeRoute({
    method: 'post',
    path: '/v1/jobs',
    scope: 'intake',
    summary:
      'creates agent jobs through the pipeline: one creation, or an array (docs/creations.md)',
    request: z.union([creation, Batch(creation)]),
    responses: {
      202: {
        description: 'accepted: one result, or one per creation; its event is `job.*`',
        schema: z.union([SendResult, z.object({ results: z.array(SendResult) })]),
      },
      400: { description: 'invalid creation; `problems` name the fields' },
      409: { description: 'the idempotency key was used for another dispatch' },
      429: {
        description: "a project's backlog is full (PROJECT_BACKLOG_MAX): retry after Retry-After",
      },
      503: { description: 'Redis unavailable, or too many bodies in flight (Retry-After)' },
    },
  });
  describeRoute({
    method: 'get',
    path: '/v1/followups/:dispatchId',
    scope: 'intake',
    summary: "a follow-up's state (what `agent-dispatch status` prints)",
    responses: { 200: { description: 'its state', schema: DispatchStatus }, 503: unavailable },
  });
  describeControls();
  describeEventRoutes();
  describeWebhookRoutes();
}

function describeControls(): void {
  describeRoute({
    method: 'delete',
    path: '/v1/followups/:dispatchId',
    scope: 'operator',
    summary: 'cancels a follow-up or creation not sent yet (followup.cancelled, job.cancelled)',
    responses: {
      200: {
        description: 'cancelled',
        schema: z.object({
          dispatchId: z.string(),
          state: z.literal('done'),
          type: z.enum(['followup.cancelled', 'job.cancelled']),
        }),
      },
      409: { description: 'being sent, sent or finished: not cancellable' },
      503: unavailable,
    },
  });
  describeRedriveRoutes();
  for (const action of ['pause', 'resume'] as const)
    describeRoute({
      method: 'post',
      path: `/v1/projects/:projectId/${action}`,
      scope: 'operator',
      summary: `${action}s one project, fleet-wide`,
      responses: { 200: { description: 'done', schema: PauseResult }, 503: unavailable },
    });
  describeRoute({
    method: 'post',
    path: '/v1/projects/:projectId/unpark',
    scope: 'operator',
    summary: "clears the project's 429 park and wakes the follow-ups waiting it out",
    responses: {
      200: {
        description: 'the park it cleared (parkedUntil null: none was in force)',
        schema: z.object({
          projectId: z.string(),
          parkedUntil: z.string().nullable(),
          changed: z.boolean(),
          woken: z.number(),
        }),
      },
      503: unavailable,
    },
  });
  describeRoute({
    method: 'put',
    path: '/v1/projects/:projectId/limit',
    scope: 'operator',
    summary: "sets the project's own send limit (`50/1h`), or clears it (null)",
    request: z.strictObject({ limit: z.string().nullable() }),
    responses: {
      200: {
        description: 'the limit now and before (null: SEND_RATE_LIMIT)',
        schema: z.object({
          projectId: z.string(),
          limit: z.string().nullable(),
          previous: z.string().nullable(),
        }),
      },
      400: { description: 'a malformed limit' },
      503: unavailable,
    },
  });
  describeRoute({
    method: 'get',
    path: '/v1/projects/:projectId',
    scope: 'operator',
    summary: 'what `agent-dispatch project show` prints',
    responses: { 200: { description: 'the project', schema: ProjectView }, 503: unavailable },
  });
}
