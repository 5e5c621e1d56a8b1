import { integer, rate } from './values.js';

/**
 * The settings of a project's budget, spread into the settings table: how many sends a window may
 * hold, and how many of its follow-ups may wait.
 */
export const BUDGET_SETTINGS = {
  SEND_RATE_LIMIT: {
    schema: rate,
    default: '100/1h',
    description: 'sends per project in any window of that length, fleet-wide',
  },
  PROJECT_BACKLOG_MAX: {
    schema: integer(1, 1_000_000_000),
    description:
      "a project's follow-ups not yet sent (queued); a send that would go past it is refused whole (`BacklogFullError`, HTTP 429 with Retry-After); unset: no limit",
  },
} as const;
