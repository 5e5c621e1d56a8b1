import { formatDuration } from '../config/index.js';
import { budgetMarginMs } from './budget.js';

/**
 * `project show`'s reading of one project (projectShow-5.lua), decoded and judged: the controls
 * are written by this service's scripts, but Redis holds whatever anyone wrote (a hand-typed
 * HSET), and a view must render it all. Each value that ACQUIRE could not use as
 * meant, or that is not a time, becomes a finding (`invalid stored ...`) beside a safe value.
 */

/** The longest window a project limit may have: one day. */
export const LIMIT_WINDOW_MAX_MS = 86_400_000;

/**
 * The largest count a limit may have: ACQUIRE refuses a larger `max` (MAX_SENDS, acquire-reads.lua)
 * as a store item error, so each follow-up of the project would stop and wait for an operator.
 */
export const LIMIT_COUNT_MAX = 2_147_483_647;

/** One project as `project show` sees it, at `nowMs` of Redis's clock. Times are epoch ms. */
export interface ProjectState {
  readonly projectId: string;
  readonly nowMs: number;
  readonly paused: boolean;
  /** When the pause began (0 when not paused, or when the stored time is not one). */
  readonly pausedAt: number;
  /** The project's own limit as written (`50/1h`), or `undefined`: `SEND_RATE_LIMIT` applies. */
  readonly limit: string | undefined;
  /** The budget in force, as counted (its window includes the margin). */
  readonly budget: { readonly max: number; readonly windowMs: number };
  /** Sends in the current window, and slots reserved by follow-ups waiting for one. */
  readonly sendsInWindow: number;
  readonly reservedSlots: number;
  /** When a new follow-up's slot would open (`nowMs` when there is room now; 0: no time). */
  readonly nextSlotAt: number;
  /** Until when the API's 429 parked the project (0: not parked). */
  readonly parkedUntil: number;
  readonly queued: number;
  readonly sending: number;
  /** Sent (or unsettled) follow-ups whose agent job the poller reads. */
  readonly tracked: number;
  /** Whether the counts are exact: the open dispatches read were at most the scan cap. */
  readonly countsExact: boolean;
  /** What is wrong with what is stored, each `invalid stored ...`; empty when nothing is. */
  readonly problems: readonly string[];
}

/** The reply of projectShow-5.lua. */
export type ShowReply = [
  nowMs: number,
  paused: string,
  pausedAt: string,
  limit: string,
  max: string,
  windowMs: string,
  countedMax: string,
  countedWindowMs: string,
  ...rest: (number | string | string[])[],
];

/** Epoch ms a `Date` can show. */
const isTime = (ms: number) => Number.isFinite(ms) && Math.abs(ms) <= 8.64e15;

/** Decodes and judges the reply of projectShow-5.lua for `projectId`. */
export function readShowReply(projectId: string, reply: ShowReply): ProjectState {
  const [nowMs, paused, pausedAt, limit, max, windowMs, countedMax, countedWindow, ...rest] = reply;
  const n = (i: number) => Number(rest[i] ?? 0);
  const [slotText, parkText] = [String(rest[2] ?? ''), String(rest[3] ?? '')];
  const problems: string[] = [];
  const findings = rest[9];
  for (const finding of Array.isArray(findings) ? findings : [])
    if (finding !== 'limit') problems.push(`invalid stored ${finding}`);
  if (paused !== '' && paused !== '1')
    problems.push(`invalid stored pause flag ${quote(paused)}: only "1" pauses`);
  const pausedMs = paused === '1' ? Number(pausedAt) : 0;
  if (paused === '1' && !isTime(pausedMs))
    problems.push(`invalid stored pausedAt ${quote(pausedAt)}: not a time`);
  const limitProblem = judgeLimit(limit, max, windowMs, String(rest[10] ?? ''));
  if (limitProblem) problems.push(limitProblem);
  const park = parkText === '' ? 0 : Number(parkText);
  if (!isTime(park)) problems.push(`invalid stored park ${quote(parkText)}: not a time`);
  const slot = Number(slotText);
  if (!isTime(slot) && !limitProblem)
    problems.push(`invalid stored budget log: its next slot (${slotText}) is not a time`);
  return {
    projectId,
    nowMs,
    paused: paused === '1',
    pausedAt: isTime(pausedMs) ? pausedMs : 0,
    limit: limit || undefined,
    budget: { max: Number(countedMax), windowMs: Number(countedWindow) },
    sendsInWindow: n(0),
    reservedSlots: n(1),
    nextSlotAt: isTime(slot) ? slot : 0,
    parkedUntil: isTime(park) ? park : 0,
    queued: n(4),
    sending: n(5),
    tracked: n(6),
    countsExact: n(7) === n(8),
    problems,
  };
}

/** ACQUIRE's bounds of a stored window and tolerance (MAX_WINDOW_MS, acquire-reads.lua). */
const ACQUIRE_WINDOW_MAX_MS = 1e13;

/**
 * What is wrong with a stored limit, or `undefined`. ACQUIRE counts with `max`, `windowMs` (margin
 * included) and `toleranceMs`, and stops each follow-up of the project as a store item error when
 * one is out of its bounds (acquire-reads.lua), so each such value is a finding here too; `limit`
 * is their text for people. A window past a day (written by hand) is a finding ACQUIRE counts with.
 */
function judgeLimit(
  limit: string,
  max: string,
  windowMs: string,
  toleranceMs: string,
): string | undefined {
  if (limit === '' && max === '' && windowMs === '') return undefined;
  const what = `invalid stored limit ${quote(limit)}`;
  const [count, window, tolerance] = [Number(max), Number(windowMs), Number(toleranceMs)];
  if (!Number.isSafeInteger(count) || count < 1 || !Number.isFinite(window) || window < 1)
    return `${what}: max ${quote(max)} and windowMs ${quote(windowMs)} are not positive numbers, so ACQUIRE cannot count with them; set the limit again or clear it`;
  const refused = (why: string) =>
    `${what}: ${why}, which ACQUIRE refuses, so each follow-up of the project waits for an operator; set the limit again or clear it`;
  if (count > LIMIT_COUNT_MAX) return refused(`its count is over ${LIMIT_COUNT_MAX}`);
  if (!Number.isInteger(window) || window > ACQUIRE_WINDOW_MAX_MS)
    return refused(`windowMs ${quote(windowMs)} is not a whole number of ms up to 1e13`);
  if (toleranceMs === '' || !(tolerance >= 0 && tolerance <= ACQUIRE_WINDOW_MAX_MS))
    return refused(`toleranceMs ${quote(toleranceMs)} is not a number of ms from 0 to 1e13`);
  if (limit === '') return `${what}: max and windowMs without the limit's text`;
  if (window > LIMIT_WINDOW_MAX_MS + budgetMarginMs(LIMIT_WINDOW_MAX_MS))
    return `${what}: its window (${formatDuration(window)}) is over 24h; set a limit within 24h or clear it`;
  return undefined;
}

/** A stored value in a message: quoted, and cut short. */
function quote(value: string): string {
  return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
}
