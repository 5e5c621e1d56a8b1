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
export class AgentApiError extends Error {
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
