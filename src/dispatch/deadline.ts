import { z } from 'zod';
import { parseDurationMs } from '../config/units.js';

/**
 * A follow-up's deadline: `ttl` (a duration, written as settings write them: `30m`, `2h`) or
 * `expiresAt` (an ISO 8601 date-time with its time zone), never both. One whose turn comes after
 * it ends `followup.expired` unsent, no budget spent: ACQUIRE decides it (acquire-n.lua). The
 * record stores it as epoch ms (`expiresAt`); a `ttl` is counted from Redis's time when REGISTER
 * writes the record, the fleet's one clock.
 */

/** Longest `ttl` accepted: a deadline further out than this is no deadline. */
export const TTL_MAX_MS = 3650 * 86_400_000;

const DURATIONS = '250ms, 5s, 30m, 2h or 7d';

/** `ttl`: a duration above 0 and at most {@link TTL_MAX_MS}. */
export const ttlField = z
  .string({ error: `must be a duration such as ${DURATIONS}` })
  .refine((text) => parseDurationMs(text) !== undefined, {
    error: `must be a duration such as ${DURATIONS}`,
    abort: true,
  })
  .refine((text) => (parseDurationMs(text) ?? 0) > 0, { error: 'must be more than 0' })
  .refine((text) => (parseDurationMs(text) ?? 0) <= TTL_MAX_MS, {
    error: 'must be at most 3650d',
  });

/** `expiresAt`: an ISO 8601 date-time with a time zone (`Z` or an offset), in the future. */
export const expiresAtField = z.iso
  .datetime({
    offset: true,
    error: 'must be an ISO 8601 date-time with a time zone, such as 2026-12-01T09:00:00Z',
  })
  .refine((text) => Date.parse(text) > Date.now(), {
    error: 'must be in the future',
    // Only of a date-time: one that is not has its own problem.
    when: (payload) => payload.issues.length === 0,
  });

/** The schema's fields of a deadline (`null` means absent, as for every optional field). */
export const DEADLINE_FIELDS = {
  ttl: ttlField
    .nullish()
    .describe('a deadline from now (30m, 2h); past it, not sent yet: followup.expired'),
  expiresAt: expiresAtField
    .nullish()
    .describe('a deadline (ISO 8601, with its time zone); not with ttl'),
};

/** The fields of a deadline. */
export interface Deadline {
  /** A duration (`30m`), counted from when the follow-up is registered. */
  readonly ttl?: string | undefined;
  /** An ISO 8601 date-time with its time zone. */
  readonly expiresAt?: string | undefined;
}

/** The deadline fields of a validated follow-up, only those given. */
export function deadlineOf(data: {
  readonly ttl?: string | null | undefined;
  readonly expiresAt?: string | null | undefined;
}): Deadline {
  if (typeof data.ttl === 'string') return { ttl: data.ttl };
  return typeof data.expiresAt === 'string' ? { expiresAt: data.expiresAt } : {};
}

/** Both given: the problem, on `expiresAt`; `undefined` when at most one is. */
export function bothDeadlinesProblem(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null) return undefined;
  const { ttl, expiresAt } = input as { ttl?: unknown; expiresAt?: unknown };
  const given = (value: unknown) => value !== undefined && value !== null;
  return given(ttl) && given(expiresAt) ? 'give either ttl or expiresAt, not both' : undefined;
}

/**
 * The deadline as REGISTER takes it: `''` none, `+<ms>` a ttl (counted from Redis's time), or
 * `<epoch ms>`. Only for a validated follow-up.
 */
export function deadlineArgument(deadline: Deadline): string {
  if (deadline.ttl !== undefined) return `+${parseDurationMs(deadline.ttl) ?? 0}`;
  if (deadline.expiresAt !== undefined) return String(Date.parse(deadline.expiresAt));
  return '';
}
