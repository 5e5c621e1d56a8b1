import type { IncomingHttpHeaders } from 'node:http';
import { AgentApiError, type AgentErrorCode } from './errors.js';

/**
 * Turns one failed HTTP exchange into an {@link AgentApiError}: an error status into its code, a
 * transport failure into `network` or `timeout` with the right `ambiguous` flag.
 */

/** Which call failed, for messages: `send` is the follow-up POST, `get` the status read. */
export type Operation = 'send' | 'get';

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
  const accepted = op === 'send' ? ' (the message was accepted)' : '';
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

const TIMEOUT_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/**
 * The error for a request that got no complete answer.
 *
 * `written` is the one fact that decides ambiguity: undici calls the handler's `onRequestStart`
 * synchronously right before it writes the request to a connected socket, so before that point
 * (connection refused, DNS, TLS, connect timeout, a queued request aborted) nothing can have
 * reached the server. After it, a reset, a close or a timeout leaves the outcome unknown.
 */
export function errorFromTransport(
  op: Operation,
  cause: unknown,
  written: boolean,
  aborted: boolean,
): AgentApiError {
  const errCode = errorCodeOf(cause);
  const code: AgentErrorCode = aborted || TIMEOUT_CODES.has(errCode) ? 'timeout' : 'network';
  const what = aborted ? 'aborted' : errCode;
  const message = written
    ? `agent API ${op} failed after the request was written, outcome unknown (${what})`
    : `agent API ${op} failed before the request was written (${what})`;
  return new AgentApiError(message, { code, ambiguous: written, cause });
}

function errorCodeOf(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? code : err.name;
  }
  return 'unknown error';
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
