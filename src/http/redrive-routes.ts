import { z } from 'zod';
import { REDRIVE_LIMIT_MAX, redriveFilterSchema } from '../producer/index.js';
import { describeRoute } from './openapi.js';

/**
 * The OpenAPI description of the redrive routes (`controls.ts`): one dead letter by its id, or
 * several (`POST /v1/redrive`, whose body the admin checks with the same schema).
 */

const RedriveResult = z.object({
  dispatchId: z.string(),
  redrivenTo: z.string().describe('the new follow-up (its `redriveOf` is `dispatchId`)'),
  created: z.boolean().describe('false: an earlier redrive made it, nothing was sent now'),
});

const Refused = z.object({
  dispatchId: z.string(),
  error: z.string(),
  why: z.enum(['unknown', 'not_ended', 'not_dead_letter', 'prompt_gone', 'job_not_created']),
});

const Planned = z.looseObject({
  dispatchId: z.string(),
  projectId: z.string(),
  jobId: z.string(),
  type: z.string(),
  reason: z.string(),
  finishedAt: z.number().describe('epoch ms of its end'),
  dryRun: z.literal(true).describe('a dry run: it would be redriven'),
});

const unavailable = { description: 'Redis is unavailable; retry later (Retry-After)' };

/** Describes `POST /v1/followups/:dispatchId/redrive` and `POST /v1/redrive`. */
export function describeRedriveRoutes(): void {
  describeRoute({
    method: 'post',
    path: '/v1/followups/:dispatchId/redrive',
    scope: 'operator',
    summary:
      'sends a follow-up that ended undeliverable or timed out again, as a new follow-up (idempotent)',
    responses: {
      200: {
        description:
          'the new follow-up (`created` false: an earlier redrive made it, nothing was sent now)',
        schema: RedriveResult,
      },
      404: { description: 'no such follow-up (or expired)' },
      409: {
        description:
          'not redrivable (`why`: not_ended, not_dead_letter, prompt_gone, job_not_created); nothing changed',
      },
      503: unavailable,
    },
  });
  describeRoute({
    method: 'post',
    path: '/v1/redrive',
    scope: 'operator',
    summary:
      'sends dead letters again as new follow-ups (idempotent): `dispatchIds`, or those that match project, reason and since, oldest end first',
    request: redriveFilterSchema(REDRIVE_LIMIT_MAX),
    responses: {
      200: {
        description:
          'one answer per dead letter, in the order redriven: the new follow-up, a refusal naming why, or with `dryRun` what would be redriven',
        schema: z.object({ results: z.array(z.union([RedriveResult, Refused, Planned])) }),
      },
      400: { description: 'invalid body; `problems` name the field (an unknown one too)' },
      413: { description: 'body over 256 KiB' },
      415: { description: 'not JSON' },
      503: unavailable,
    },
  });
}
