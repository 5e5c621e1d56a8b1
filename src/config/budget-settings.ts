import type { SettingProblem } from './errors.js';
import type { Rate } from './units.js';
import { z } from 'zod';
import { integer, rate } from './values.js';

/** `BUDGET_SCOPE`: whether creations count in the follow-ups' window or in one of their own. */
export const BUDGET_SCOPES = ['shared', 'split'] as const;
export type BudgetScope = (typeof BUDGET_SCOPES)[number];

/**
 * The budget settings, spread into the settings table: the per-project send limit and the
 * organization's limit over the whole fleet, and how many of a project's follow-ups may wait.
 */
export const BUDGET_SETTINGS = {
  SEND_RATE_LIMIT: {
    schema: rate,
    default: '100/1h',
    description: 'sends per project in any window of that length, fleet-wide',
  },
  BUDGET_SCOPE: {
    schema: z.enum(BUDGET_SCOPES, { message: `expected one of ${BUDGET_SCOPES.join(', ')}` }),
    default: 'shared',
    description:
      '`shared`: agent-job creations and follow-ups count in one window per project (SEND_RATE_LIMIT); `split`: creations count in a window of their own (CREATE_RATE_LIMIT)',
  },
  CREATE_RATE_LIMIT: {
    schema: rate,
    default: '100/1h',
    description:
      'agent-job creations per project in any window of that length, fleet-wide, when BUDGET_SCOPE=split',
  },
  ORG_RATE_LIMIT: {
    schema: rate,
    description:
      'sends and creations of the whole fleet (every project) in any window of that length, checked after the project limit, projects served in turn; split evenly over the DISPATCH_SHARDS shards (each shard enforces its share, so the total is never exceeded but a quiet shard leaves its share unused); at least one per shard',
  },
  PROJECT_BACKLOG_MAX: {
    schema: integer(1, 1_000_000_000),
    description:
      "a project's follow-ups and creations not yet sent (queued); a send that would go past it is refused whole (`BacklogFullError`, HTTP 429 with Retry-After); unset: no limit",
  },
} as const;

/** `ORG_RATE_LIMIT` needs one send per window for every shard (each enforces its own share). */
export function orgRateProblems(org: Rate | undefined, shardCount: number): SettingProblem[] {
  if (org === undefined || org.max >= shardCount) return [];
  return [
    {
      setting: 'ORG_RATE_LIMIT',
      message: `${org.max} per window cannot be split over DISPATCH_SHARDS=${shardCount} shards: it must be at least ${shardCount}`,
    },
  ];
}

/**
 * Shard `index`'s share of `ORG_RATE_LIMIT` among `count` shards: N / count, the remainder to the
 * first shards, so the shares add up to N exactly and no window of the fleet holds more than N.
 */
export function orgShare(org: Rate | undefined, index: number, count: number): Rate | undefined {
  if (org === undefined) return undefined;
  const max = Math.floor(org.max / count) + (index < org.max % count ? 1 : 0);
  return Object.freeze({ max, windowMs: org.windowMs });
}
