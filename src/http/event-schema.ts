import { z } from 'zod';
import { EVENT_TYPES, JOB_EVENT_TYPES, type EventType } from '../dispatch/event.js';

/**
 * The completion event described field by field (contract, section 5): the stream entry's fields,
 * the body the HTTP routes and webhooks carry, and what each type means. The OpenAPI document
 * takes the body's schema from here, and `docs/reference/event-format.md` is rendered from all
 * three (`npm run docs`), which fails when a field the code writes is not described here.
 */

/** What each event type means. */
export const EVENT_TYPE_MEANINGS: Readonly<Record<EventType, string>> = {
  [EVENT_TYPES.completed]: 'the run the follow-up started ended `completed`',
  [EVENT_TYPES.failed]: 'the run ended `failed`',
  [EVENT_TYPES.archived]: 'the agent job was archived',
  [EVENT_TYPES.timedOut]: 'the run was still going after `TRACK_TIMEOUT`; `reason` says why',
  [EVENT_TYPES.undeliverable]: 'it could not be sent, or its outcome not known; `reason` says why',
  [EVENT_TYPES.cancelled]: 'an operator cancelled it before it was sent (`cancel`)',
  [EVENT_TYPES.expired]:
    'its deadline (`ttl` or `expiresAt`) passed before its turn came; never sent',
  [JOB_EVENT_TYPES.completed]: "a creation: the new job's first run ended `completed`",
  [JOB_EVENT_TYPES.failed]: "a creation: the new job's first run ended `failed`",
  [JOB_EVENT_TYPES.archived]: 'a creation: the new job was archived',
  [JOB_EVENT_TYPES.timedOut]:
    "a creation: the new job's first run was still going after `TRACK_TIMEOUT`",
  [JOB_EVENT_TYPES.undeliverable]:
    'a creation that could not be sent, or whose answer was lost (`ambiguous`: never resent); `reason` says why',
  [JOB_EVENT_TYPES.cancelled]: 'a creation an operator cancelled before it was sent',
  [JOB_EVENT_TYPES.expired]: 'a creation whose deadline passed before its turn; never sent',
};

/** The fields of a stream entry, all strings, in the order they are written. */
export const EVENT_ENTRY_FIELDS = {
  type: 'the event type (below)',
  dispatchId: 'the follow-up: the key to de-duplicate on',
  projectId: "the agent job's project",
  jobId: 'the agent job',
  status: "the agent job's last status seen; empty if it was never sent",
  prLink: "the pull request's URL; empty when the job has none",
  event: 'JSON: the fields of the body below, but `type`',
  traceparent: "W3C trace context of the follow-up's trace; only when it was traced",
  v: 'the format version: `1`',
} as const;

const time = (what: string) =>
  z.string().nullable().describe(`${what}, ISO 8601 (UTC); null when it never happened`);

/**
 * One completion event as a page, an SSE message and a webhook carry it: the stream entry's
 * `event` object with its `type` first (`dispatch/event-body.ts`).
 */
export const EventBodySchema = z.looseObject({
  type: z.string().describe('the event type'),
  dispatchId: z.string().describe('the follow-up: the key to de-duplicate on'),
  projectId: z.string().describe("the agent job's project"),
  jobId: z.string().describe('the agent job'),
  key: z.string().nullable().optional().describe("the follow-up's idempotency key, or null"),
  meta: z
    .record(z.string(), z.unknown())
    .nullable()
    .optional()
    .describe("the follow-up's `meta`, as given, or null"),
  job: z
    .looseObject({})
    .nullable()
    .optional()
    .describe(
      'the last agent job seen (`id`, `status`, `prLink`, `source`, `model`, `createdAt`, `archivedAt`), or null',
    ),
  reason: z
    .string()
    .nullable()
    .optional()
    .describe(
      'why it ended so, for `undeliverable` (`bad_request`, `not_found`, `ambiguous`, `invalid_payload`, `missing_record`, `job_not_created`, `creation_expired`, `send_failed:<code>`, `worker_failed:<error>`, `stuck_sending`) and `timed_out` (`track_timeout`); else null',
    ),
  enqueuedAt: time('when it was accepted').optional(),
  sentAt: time('when its send was recorded').optional(),
  finishedAt: time('when it ended: the event was written').optional(),
  attempts: z.number().optional().describe('send attempts made'),
  expiresAt: z
    .string()
    .nullable()
    .optional()
    .describe('its deadline (`ttl` or `expiresAt`), ISO 8601 (UTC); null when it has none'),
});
