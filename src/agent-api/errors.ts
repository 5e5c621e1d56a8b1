import type { IncomingHttpHeaders } from 'node:http';
import { AgentDispatchError } from '../agent-dispatch-error.js';
/**
 * The one error type of the agent-API boundary (in the manner of undici's `lib/core/errors.js`): a
 * stable `code` to branch on, the HTTP status when the server answered, and `ambiguous`, which
 * says whether a send may have been processed without us knowing. Callers branch on `code` and
 * `ambiguous`, never on the message text.
 */

/**
 * Why a call failed.
 *
 * - `bad_request`: 400, or any other 4xx without a code of its own. Permanent.
 * - `unauthorized`: 401 or 403. Lasts until the key is fixed (see {@link configRejectionStatus}).
 * - `not_found`: 404, the project or job does not exist. Permanent.
 * - `rate_limited`: 429; `retryAfterMs` is set when the server said how long to wait.
 * - `server`: 5xx. The server did not process the request (as far as HTTP can tell).
 * - `timeout`: no complete answer in time after the request was written, or the caller's signal
 *   aborted the call.
 * - `network`: the connection failed (refused, DNS, TLS, connect timeout, reset, closed).
 * - `bad_response`: a 2xx whose body is not an agent job. For a send this means the message
 *   **was accepted**: the server answered with success, only the body is unusable.
 */
export type AgentErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'not_found'
  | 'rate_limited'
  | 'server'
  | 'timeout'
  | 'network'
  | 'bad_response';

/** Every {@link AgentErrorCode}, for exhaustive tests and metrics labels. */
export const AGENT_ERROR_CODES = [
  'bad_request',
  'unauthorized',
  'not_found',
  'rate_limited',
  'server',
  'timeout',
  'network',
  'bad_response',
] as const satisfies readonly AgentErrorCode[];

/** What {@link AgentApiError}'s constructor needs besides the message. */
export interface AgentApiErrorDetails {
  readonly code: AgentErrorCode;
  readonly httpStatus?: number | undefined;
  readonly ambiguous: boolean;
  readonly retryAfterMs?: number | undefined;
  readonly serverMessage?: string | undefined;
  readonly cause?: unknown;
}

/**
 * A failed call to the agent API. The message names the operation and what happened; it never
 * contains the API key or the Authorization header (the key is also scrubbed from any text the
 * server sent back).
 */
export class AgentApiError extends AgentDispatchError {
  /** Stable reason; see {@link AgentErrorCode}. */
  readonly code: AgentErrorCode;
  /** The HTTP status when the server answered; `undefined` when it did not. */
  readonly httpStatus: number | undefined;
  /**
   * `true`: the request may have reached the server and its outcome is unknown (a timeout, reset
   * or close after the request was written). A send that failed this way may have been delivered
   * and must be settled from the job's status before any resend.
   *
   * `false`: the request was certainly not processed (it was never written: connection refused,
   * DNS, TLS, connect timeout) or the server answered, so the status says what happened.
   */
  readonly ambiguous: boolean;
  /** For `rate_limited`: how long the server asked us to wait, when it said so. */
  readonly retryAfterMs: number | undefined;
  /** The server's own error text (JSON `error` field or plain body), at most 200 characters. */
  readonly serverMessage: string | undefined;

  constructor(message: string, details: AgentApiErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'AgentApiError';
    this.code = details.code;
    this.httpStatus = details.httpStatus;
    this.ambiguous = details.ambiguous;
    this.retryAfterMs = details.retryAfterMs;
    this.serverMessage = details.serverMessage;
  }
}

/** Whether `err` is an {@link AgentApiError}. */
export function isAgentApiError(err: unknown): err is AgentApiError {
  return err instanceof AgentApiError;
}

/**
 * The HTTP status of a failure that says the service is set up wrong rather than that one call
 * failed: 401 or 403 (the key is expired, revoked, wrong, or limited by scope or IP allowlist),
 * or a 3xx (the API does not redirect its endpoints, so `AGENT_API_URL` is wrong). Sends wait for
 * it to be fixed instead of ending anything. `undefined` for any other failure.
 */
export function configRejectionStatus(err: unknown): number | undefined {
  if (!(err instanceof AgentApiError)) return undefined;
  if (err.code === 'unauthorized') return err.httpStatus ?? 401;
  const status = err.httpStatus ?? 0;
  return status >= 300 && status < 400 ? status : undefined;
}

/** The fields of an error worth a log line; see {@link describeError}. */
export interface ErrorDescription {
  readonly code: AgentErrorCode | 'unknown';
  readonly httpStatus: number | undefined;
  readonly ambiguous: boolean;
  readonly retryAfterMs: number | undefined;
}

/**
 * Summarises any thrown value for a log line. Errors from outside this client come back as code
 * `'unknown'` and ambiguous, the safe assumption for a send.
 */
export function describeError(err: unknown): ErrorDescription {
  if (err instanceof AgentApiError) {
    const { code, httpStatus, ambiguous, retryAfterMs } = err;
    return { code, httpStatus, ambiguous, retryAfterMs };
  }
  return { code: 'unknown', httpStatus: undefined, ambiguous: true, retryAfterMs: undefined };
}

/*
 * How an answer with an error status becomes an AgentApiError (a transport failure becomes one in
 * `transport-errors.ts`).
 */

/** Which call failed, for messages: `send` is the follow-up POST, `get` the status read. */
export type Operation = 'send' | 'get' | 'create';

/** Longest server text kept in an error: enough to read, too short to flood a log line. */
const SERVER_MESSAGE_MAX_CHARS = 200;

/** Removes the API key from text that came from elsewhere (a server echoing our headers). */
export type Scrub = (text: string) => string;

/** The error for a response whose status is not 2xx. `ambiguous` is false: the server answered. */
export function errorFromStatus(
  op: Operation,
  status: number,
  headers: IncomingHttpHeaders,
  body: string,
  scrub: Scrub,
  cause?: unknown,
): AgentApiError {
  const code = codeOfStatus(status);
  const serverMessage = serverMessageOf(body, scrub);
  const retryAfterMs = code === 'rate_limited' ? retryAfterMsOf(headers) : undefined;
  const suffix = serverMessage === undefined ? '' : `: ${serverMessage}`;
  return new AgentApiError(`agent API answered ${status} to ${op}${suffix}`, {
    code,
    httpStatus: status,
    ambiguous: false,
    retryAfterMs,
    serverMessage,
    cause,
  });
}

/**
 * The error for a 2xx whose body is not an agent job. Not ambiguous: the server answered with
 * success, so a send **was accepted**; only the body is unusable.
 */
export function badResponse(op: Operation, status: number, cause: unknown): AgentApiError {
  const accepted = {
    send: ' (the message was accepted)',
    create: ' (the job was created)',
    get: '',
  }[op];
  return new AgentApiError(
    `agent API answered ${status} to ${op} with a body that is not an agent job${accepted}`,
    { code: 'bad_response', httpStatus: status, ambiguous: false, cause },
  );
}

/** The code of an error status (contract, section 1). */
export function codeOfStatus(status: number): AgentErrorCode {
  if (status === 401 || status === 403) return 'unauthorized';
  if (status === 404) return 'not_found';
  if (status === 429) return 'rate_limited';
  if (status >= 500) return 'server';
  return 'bad_request';
}

/** The `error` field of a JSON body, else the body as text; whitespace folded, truncated. */
export function serverMessageOf(body: string, scrub: Scrub): string | undefined {
  let text = body;
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object' && 'error' in parsed) {
      const error = (parsed as { error: unknown }).error;
      if (typeof error === 'string') text = error;
    }
  } catch {
    // Not JSON: a plain-text or HTML body is reported as it is.
  }
  const folded = scrub(text).replace(/\s+/g, ' ').trim();
  if (folded === '') return undefined;
  return folded.length > SERVER_MESSAGE_MAX_CHARS
    ? `${folded.slice(0, SERVER_MESSAGE_MAX_CHARS - 1)}…`
    : folded;
}

/**
 * How long a 429 asks us to wait: `Retry-After` (delta seconds or an HTTP date), else
 * `RateLimit-Reset` (delta seconds), else the `t` parameter of the newer `RateLimit` header.
 * The API documents none of them (contract, section 1): use them when present, never rely on them.
 */
export function retryAfterMsOf(headers: IncomingHttpHeaders, now = Date.now()): number | undefined {
  const retryAfter = first(headers['retry-after']);
  if (retryAfter !== undefined) {
    const seconds = deltaSeconds(retryAfter);
    if (seconds !== undefined) return Math.ceil(seconds * 1000);
    const date = Date.parse(retryAfter);
    if (Number.isFinite(date)) return Math.max(0, date - now);
  }
  const reset = deltaSeconds(first(headers['ratelimit-reset']) ?? '');
  if (reset !== undefined) return Math.ceil(reset * 1000);
  const policy = /(?:^|;)\s*t=(\d+)/.exec(first(headers['ratelimit']) ?? '');
  return policy?.[1] === undefined ? undefined : Number(policy[1]) * 1000;
}

function deltaSeconds(text: string): number | undefined {
  const trimmed = text.trim();
  return /^\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : undefined;
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
