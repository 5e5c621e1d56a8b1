import { z } from 'zod';
import { parseDurationMs } from '../config/units.js';
import { ID_MAX_CHARS } from '../dispatch/followup.js';
import { InvalidControlError } from './controls.js';

/**
 * What a redrive of several dead letters takes (`admin.redriveDeadLetters`, `POST /v1/redrive`,
 * `agent-dispatch redrive`): either their `dispatchIds`, or a filter of the dead letters (by
 * project, reason, end time), and `limit`, `dryRun`. `null` means absent, as for a follow-up; an
 * unknown field is an error naming it.
 */

/** The dead letters one call redrives when `limit` is absent. */
export const REDRIVE_DEFAULT_LIMIT = 100;
/** Most dead letters one call that answers them all at once redrives (the CLI's has no limit). */
export const REDRIVE_LIMIT_MAX = 10_000;
/** Most `dispatchIds` of one call. */
export const REDRIVE_IDS_MAX = 1_000;

/** A redrive of several dead letters, as callers write it. */
export interface RedriveFilter {
  /** The dead letters of this project. */
  readonly project?: string | null | undefined;
  /**
   * The event's `reason` (`not_found`, `http_400`...), or `timed_out` for the timed-out ones.
   * Without it, the ones that ended `ambiguous` or `stuck_sending` (the agent may have their
   * prompt) are left out: naming that reason redrives them.
   */
  readonly reason?: string | null | undefined;
  /**
   * The dead letters that ended at or after this time: an ISO 8601 date-time with its time zone,
   * or a duration back from now (`2h`, `7d`).
   */
  readonly since?: string | null | undefined;
  /** At most this many, oldest end first. @defaultValue 100 */
  readonly limit?: number | null | undefined;
  /** Answers what would be redriven; sends nothing. */
  readonly dryRun?: boolean | null | undefined;
  /** These dead letters (not with a filter). */
  readonly dispatchIds?: readonly string[] | null | undefined;
}

/** A {@link RedriveFilter} checked: `since` as epoch ms. */
export interface CheckedRedriveFilter {
  readonly projectId: string | undefined;
  readonly reason: string | undefined;
  readonly sinceMs: number | undefined;
  readonly limit: number;
  readonly dryRun: boolean;
  readonly dispatchIds: readonly string[] | undefined;
}

const id = z.string().min(1).max(ID_MAX_CHARS);
const SINCE = 'an ISO 8601 date-time with its time zone, or a duration back from now such as 2h';

/** The schema of a {@link RedriveFilter} whose `limit` is at most `limitMax`. */
export function redriveFilterSchema(limitMax: number) {
  return z.strictObject({
    project: id.nullish().describe('the dead letters of this project'),
    reason: z
      .string()
      .min(1)
      .max(100)
      .nullish()
      .describe(
        "the event's reason (not_found, http_400...), or timed_out; without it, those that ended ambiguous or stuck_sending are left out",
      ),
    since: z
      .string()
      .refine((text) => sinceMs(text, 0) !== undefined, { error: `must be ${SINCE}` })
      .nullish()
      .describe(`the dead letters that ended at or after it: ${SINCE}`),
    limit: z
      .number()
      .int()
      .min(1)
      .max(limitMax)
      .nullish()
      .describe(`at most this many, oldest end first (${REDRIVE_DEFAULT_LIMIT} when absent)`),
    dryRun: z.boolean().nullish().describe('answers what would be redriven; sends nothing'),
    dispatchIds: z
      .array(id)
      .min(1)
      .max(REDRIVE_IDS_MAX)
      .nullish()
      .describe('these dead letters, instead of a filter'),
  });
}

/** The epoch ms of `since` (`now` minus a duration, or a date-time); `undefined`: malformed. */
export function sinceMs(text: string, now: number): number | undefined {
  const back = parseDurationMs(text);
  if (back !== undefined) return now - back;
  if (!z.iso.datetime({ offset: true }).safeParse(text).success) return undefined;
  return Date.parse(text);
}

/** Checks `input`; throws `InvalidControlError` naming the first field wrong. */
export function checkRedriveFilter(
  input: unknown,
  limitMax: number,
  now = Date.now(),
): CheckedRedriveFilter {
  const parsed = redriveFilterSchema(limitMax).safeParse(input ?? {});
  if (!parsed.success) {
    const { issues } = parsed.error;
    const unknown = issues.flatMap((i) => (i.code === 'unrecognized_keys' ? i.keys : []))[0];
    const issue = issues[0];
    if (unknown !== undefined)
      throw new InvalidControlError(
        unknown,
        `unknown field ${unknown} (the fields are ${Object.keys(redriveFilterSchema(1).shape).join(', ')})`,
      );
    const field = issue?.path.map(String).join('.') || '(body)';
    throw new InvalidControlError(field, issue?.message ?? 'invalid');
  }
  const f = parsed.data;
  const dispatchIds = f.dispatchIds ?? undefined;
  if (dispatchIds && (f.project ?? f.reason ?? f.since ?? null) !== null)
    throw new InvalidControlError(
      'dispatchIds',
      'takes either dispatchIds or project, reason and since, not both',
    );
  return {
    projectId: f.project ?? undefined,
    reason: f.reason ?? undefined,
    sinceMs: typeof f.since === 'string' ? sinceMs(f.since, now) : undefined,
    limit: f.limit ?? REDRIVE_DEFAULT_LIMIT,
    dryRun: f.dryRun === true,
    dispatchIds,
  };
}
