import type { IncomingHttpHeaders } from 'node:http';
import { AgentDispatchError } from '../agent-dispatch-error.js';
import {
  AgentApiError,
  badResponse,
  errorFromStatus,
  type AgentErrorCode,
  type Operation,
  type Scrub,
} from './errors.js';

/**
 * How an exchange with the agent API fails (`exchange.ts` runs it): the failure it resolves with,
 * the errors undici is aborted with (a write deadline passed, a body too large, the caller's
 * signal), and the {@link AgentApiError} the client throws for it. An exchange that answers needs
 * nothing of this file.
 */

/** Largest response body read: an agent job is a few KB; this bounds memory on a broken server. */
export const MAX_RESPONSE_BYTES = 1024 * 1024;

/** An exchange that got no complete response, with how far it got. */
export interface ExchangeFailure {
  readonly ok: false;
  readonly cause: unknown;
  /** The request was handed to a socket: it may have reached the server. */
  readonly written: boolean;
  /** The caller's signal ended the exchange. */
  readonly aborted: boolean;
  /** Set when the status line arrived before the failure (the body then failed). */
  readonly status: number | undefined;
  readonly headers: IncomingHttpHeaders;
}

/**
 * Why a request was not written: its `writeBy` deadline had passed when undici was about to hand
 * it to the socket (a send whose budget grant is too old to arrive within the budget's margin).
 * Nothing left; the caller gives the grant back.
 */
export class WriteDeadlineError extends AgentDispatchError {
  readonly code = 'write_deadline';
  constructor(lateMs: number) {
    super(`request not written: its write deadline passed ${Math.round(lateMs)} ms ago`);
    this.name = 'WriteDeadlineError';
  }
}

/** Raised through undici when a response body passes {@link MAX_RESPONSE_BYTES}. */
export class ResponseTooLargeError extends AgentDispatchError {
  readonly code = 'response_too_large';
  constructor() {
    super(`response body larger than ${MAX_RESPONSE_BYTES} bytes`);
    this.name = 'ResponseTooLargeError';
  }
}

/** What undici is aborted with when the caller's signal ends an exchange. */
export function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('request aborted', { cause: reason });
}

/** The error for an exchange that failed: its transport's, or its status line's once it came. */
export function errorOfFailure(
  op: Operation,
  failure: ExchangeFailure,
  scrub: Scrub,
): AgentApiError {
  const { status, cause } = failure;
  if (status === undefined) return errorFromTransport(op, cause, failure.written, failure.aborted);
  // The status line arrived and then the body failed: the status alone says what happened.
  if (status >= 200 && status < 300) return badResponse(op, status, cause);
  return errorFromStatus(op, status, failure.headers, '', scrub, cause);
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
