import { z } from 'zod';
import { ALL_EVENT_TYPES } from '../dispatch/event.js';
import { LIMIT_DEFAULT, LIMIT_MAX } from './event-query.js';
import { EventBodySchema } from './event-schema.js';
import { describeRoute } from './openapi.js';

/**
 * The OpenAPI description of `GET /v1/events` and `GET /v1/events/stream` (`events.ts`). The
 * event is the body `dispatch/event-body.ts` builds: the stream entry's event, `type` and ids
 * first, and whatever else that type of event carries.
 */

const FULL_TYPES = ALL_EVENT_TYPES as readonly string[];
/** A filter may name a type in full (`followup.completed`) or short (`completed`). */
const TYPE_NAMES = [
  ...FULL_TYPES,
  ...FULL_TYPES.filter((t) => t.startsWith('followup.')).map((t) => t.slice(9)),
];

/** The query parameters both routes read (`parseQuery` in `events.ts`). */
export const EventsQuery = z.object({
  after: z
    .string()
    .optional()
    .describe("the cursor to read after (a page's `next`, an SSE `id:`); absent: the oldest"),
  limit: z
    .number()
    .int()
    .min(1)
    .max(LIMIT_MAX)
    .optional()
    .describe(`most events in the page (${LIMIT_DEFAULT} when absent; the stream ignores it)`),
  project: z
    .array(z.string())
    .optional()
    .describe('only events of these projects (repeat the parameter); every project when absent'),
  type: z
    .array(z.enum(TYPE_NAMES as [string, ...string[]]))
    .optional()
    .describe('only events of these types (repeat the parameter); every type when absent'),
});

const EventsPage = z.object({
  events: z.array(EventBodySchema),
  next: z.string().describe('the cursor after this page: pass it as `after` for the next one'),
});

const errors = {
  400: { description: 'a bad `after`, `limit` or `type`; the message names the parameter' },
  500: { description: "this server's DISPATCH_SHARDS is not the fleet's" },
  503: { description: 'Redis did not answer, or too many streams are open (Retry-After)' },
};

/** Describes the routes of `events.ts`. */
export function describeEventRoutes(): void {
  describeRoute({
    method: 'get',
    path: '/v1/events',
    scope: 'events',
    summary: 'completion events after a cursor, oldest first, one page',
    query: EventsQuery,
    responses: { 200: { description: 'a page of events', schema: EventsPage }, ...errors },
  });
  describeRoute({
    method: 'get',
    path: '/v1/events/stream',
    scope: 'events',
    summary: 'completion events as server-sent events, live; `Last-Event-ID` wins over `after`',
    query: EventsQuery.omit({ limit: true }),
    responses: {
      200: {
        description:
          'a `retry:` frame, then one `id:`/`data:` message per event (data: the event as JSON)',
        contentType: 'text/event-stream',
        schema: z.string(),
      },
      ...errors,
    },
  });
}
