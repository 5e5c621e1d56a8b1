import { formatDuration, parseDurationMs, type Rate } from '../config/index.js';
import { ID_MAX_CHARS } from '../dispatch/followup.js';
import type { DispatchState } from '../dispatch/record.js';
import { LIMIT_COUNT_MAX, LIMIT_WINDOW_MAX_MS } from '../dispatch/project-state.js';
import type { ProjectState } from '../store/store.js';
import { cancelDispatch, type CancelContext } from '../store/cancel.js';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * What the operator controls answer and refuse with (contract, section 4: `producer.cancel` and
 * `createAdmin`), shared by the library, the CLI, the HTTP routes and the dashboard. Each error has
 * a stable `code`; callers branch on the class.
 */

/** A control's input is invalid; nothing changed. Code `invalid_control`, `field` names it. */
export class InvalidControlError extends AgentDispatchError {
  readonly code = 'invalid_control';
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
    this.name = 'InvalidControlError';
  }
}

/** No follow-up has this id (never enqueued, or expired after the end). Code `unknown_dispatch`. */
export class UnknownDispatchError extends AgentDispatchError {
  readonly code = 'unknown_dispatch';
  constructor(readonly dispatchId: string) {
    super(`no follow-up with dispatchId ${JSON.stringify(dispatchId)}`);
    this.name = 'UnknownDispatchError';
  }
}

/**
 * The follow-up is past `queued` (being sent, sent, or finished): a cancel changes nothing, since
 * the prompt may already have reached the agent API. Code `not_cancellable`, with its `state`.
 */
export class NotCancellableError extends AgentDispatchError {
  readonly code = 'not_cancellable';
  constructor(
    readonly dispatchId: string,
    readonly state: DispatchState,
  ) {
    super(`follow-up ${dispatchId} is ${describeState(state)}: only a queued one can be cancelled`);
    this.name = 'NotCancellableError';
  }
}

function describeState(state: DispatchState): string {
  if (state === 'sending') return 'being sent (sending)';
  if (state === 'done') return 'finished (done)';
  return `already sent (${state})`;
}

/** What a cancel answers: the follow-up ended `followup.cancelled`, a creation `job.cancelled`. */
export interface CancelResult {
  readonly dispatchId: string;
  readonly state: 'done';
  readonly type: 'followup.cancelled' | 'job.cancelled';
}

/**
 * Cancels a follow-up not sent yet; throws {@link UnknownDispatchError} or
 * {@link NotCancellableError}, having changed nothing.
 */
export async function cancelFollowUp(
  ctx: CancelContext,
  dispatchId: unknown,
): Promise<CancelResult> {
  const id = checkId('dispatchId', dispatchId);
  const done = await cancelDispatch(ctx, id);
  if (done.outcome === 'unknown') throw new UnknownDispatchError(id);
  if (done.outcome === 'refused') throw new NotCancellableError(id, done.state);
  return { dispatchId: id, state: 'done', type: done.type as CancelResult['type'] };
}

/** Checks an id the way follow-up ids are checked: 1–200 characters, not blank, no control characters. */
export function checkId(field: string, value: unknown): string {
  if (typeof value !== 'string') throw new InvalidControlError(field, 'must be a string');
  if (value.length === 0 || value.length > ID_MAX_CHARS)
    throw new InvalidControlError(field, `must be 1 to ${ID_MAX_CHARS} characters`);
  if (value.trim().length === 0) throw new InvalidControlError(field, 'must not be blank');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value))
    throw new InvalidControlError(field, 'must not contain control characters');
  return value;
}

/**
 * Parses a project limit, `N/DURATION`, and holds it to its bounds: a count of 1 to
 * {@link LIMIT_COUNT_MAX} (what ACQUIRE counts with, `force` or not), a window
 * of at most 24 h, and no looser than `defaultRate` (`SEND_RATE_LIMIT`, the API's own) unless
 * `force`: see {@link mostInWindow}. Throws {@link InvalidControlError} naming the field `limit`.
 */
export function checkLimit(
  value: unknown,
  defaultRate: Rate,
  force = false,
): { text: string; rate: Rate } {
  const text = typeof value === 'string' ? value.trim() : '';
  const match = /^(\d+)\/(.+)$/.exec(text);
  const max = Number(match?.[1]);
  const windowMs = parseDurationMs(match?.[2] ?? '');
  const refuse = (problem: string) => {
    throw new InvalidControlError('limit', problem);
  };
  if (!match || windowMs === undefined) {
    const got = typeof value === 'string' ? `"${value}"` : (JSON.stringify(value) ?? String(value));
    return refuse(`expected N/DURATION such as 50/1h, got ${got}`);
  }
  if (!Number.isSafeInteger(max) || max < 1 || max > LIMIT_COUNT_MAX)
    refuse(
      `the count must be a whole number of at least 1 and at most ${LIMIT_COUNT_MAX}, got "${text}"`,
    );
  if (windowMs < 1 || windowMs > LIMIT_WINDOW_MAX_MS)
    refuse(`the window must be at least 1ms and at most 24h, got "${text}"`);
  const rate = { max, windowMs };
  const most = mostInWindow(rate, defaultRate.windowMs);
  if (!force && most > defaultRate.max)
    refuse(
      `${text} is looser than SEND_RATE_LIMIT ${formatRate(defaultRate)}: it lets up to ${most} sends go ` +
        `in ${formatDuration(defaultRate.windowMs)}, where the agent API allows ${defaultRate.max}; ` +
        'to set it anyway, use force (project limit --force, "force": true over HTTP)',
    );
  return { text, rate };
}

/**
 * The most sends `rate` lets go in one window of `windowMs`: a burst of `max` at the start of
 * each of its own windows that fit, so `max × ⌈windowMs / rate.windowMs⌉`. A limit is looser than
 * `SEND_RATE_LIMIT` when this is over its max: 200/2h is 200 in an hour (a burst), 60/40m 120
 * (two bursts), though both average no more than 100/1h.
 */
export function mostInWindow(rate: Rate, windowMs: number): number {
  return rate.max * Math.ceil(windowMs / rate.windowMs);
}

/** `N/DURATION` of a rate, as settings are written. */
export function formatRate(rate: Rate): string {
  return `${rate.max}/${formatDuration(rate.windowMs)}`;
}

/** A project as `project show` and `GET /v1/projects/:id` print it. Times are ISO strings. */
export interface ProjectView {
  readonly projectId: string;
  readonly paused: boolean;
  readonly pausedAt: string | null;
  /** The limit in force, as written, and where it comes from. */
  readonly limit: string;
  readonly limitSource: 'project' | 'default';
  readonly sendsInWindow: number;
  /** Slots reserved by follow-ups waiting for one (counted in the window). */
  readonly reservedSlots: number;
  /** When a new follow-up's send slot opens (now, when there is room); null: see `problem`. */
  readonly nextSlotAt: string | null;
  /** Until when the agent API's 429 parked the project; null when not parked. */
  readonly parkedUntil: string | null;
  readonly queued: number;
  readonly sending: number;
  readonly tracked: number;
  /** False when there were more open dispatches than `show` reads: the counts are of a part. */
  readonly countsExact: boolean;
  readonly at: string;
  /** What is wrong with what Redis holds for the project (`invalid stored ...`), or null. */
  readonly problem: string | null;
}

/** The {@link ProjectView} of what the store read; `defaultRate` is `SEND_RATE_LIMIT`. */
export function projectView(state: ProjectState, defaultRate: Rate): ProjectView {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    projectId: state.projectId,
    paused: state.paused,
    pausedAt: state.paused && state.pausedAt > 0 ? iso(state.pausedAt) : null,
    limit: state.limit ?? formatRate(defaultRate),
    limitSource: state.limit ? 'project' : 'default',
    sendsInWindow: state.sendsInWindow,
    reservedSlots: state.reservedSlots,
    nextSlotAt: state.nextSlotAt > 0 ? iso(Math.max(state.nextSlotAt, state.nowMs)) : null,
    parkedUntil: state.parkedUntil > 0 ? iso(state.parkedUntil) : null,
    queued: state.queued,
    sending: state.sending,
    tracked: state.tracked,
    countsExact: state.countsExact,
    at: iso(state.nowMs),
    problem: state.problems.length > 0 ? state.problems.join('; ') : null,
  };
}
