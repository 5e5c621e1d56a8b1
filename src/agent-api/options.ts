import type { Logger } from 'pino';
import { Pool } from 'undici';

/**
 * What the agent-API client is given: how to reach the API when it is made, and what each call
 * may add; and the keep-alive undici `Pool` those options describe.
 */

/** How to reach the agent API. Units are in the names. */
export interface AgentApiClientOptions {
  /** `{base_url}`, such as `https://api.mintlify.com`; a path prefix is kept. */
  readonly baseUrl: string;
  /** Bearer key. Kept in one private header object; never logged or put in an error message. */
  readonly apiKey: string;
  /** TCP (and TLS) connect timeout. */
  readonly connectTimeoutMs: number;
  /** Headers timeout and body timeout (between body chunks) of one request. */
  readonly requestTimeoutMs: number;
  /** Sockets per origin. @defaultValue 64 */
  readonly connections?: number;
  /** Receives one debug line per call, fields first. */
  readonly logger?: Logger;
}

/** @defaultValue of {@link AgentApiClientOptions.connections}. */
export const DEFAULT_CONNECTIONS = 64;

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call: code `timeout`, ambiguous when the request was already written. */
  readonly signal?: AbortSignal;
  /**
   * Sends only: the latest `performance.now()` time at which the request may be handed to the
   * socket; later, it is not written and the call rejects (its cause a `WriteDeadlineError`).
   */
  readonly writeBy?: number | undefined;
}

/**
 * The client's one keep-alive pool for `origin`. Pipelining 1: undici never re-dispatches a
 * request after a head-of-line failure (the client makes no retries; see `AgentApiClient`).
 */
export function poolFor(origin: string, options: AgentApiClientOptions): Pool {
  return new Pool(origin, {
    connections: options.connections ?? DEFAULT_CONNECTIONS,
    pipelining: 1,
    connect: { timeout: options.connectTimeoutMs },
    headersTimeout: options.requestTimeoutMs,
    bodyTimeout: options.requestTimeoutMs,
  });
}
