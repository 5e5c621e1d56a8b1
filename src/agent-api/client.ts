import type { Logger } from 'pino';
import { Pool, type Dispatcher } from 'undici';
import { badResponse, errorFromStatus, type Operation } from './errors.js';
import { isSuccess, scrubStrings, segment } from './request-parts.js';
import { errorFromTransport, exchange, type ExchangeResult } from './exchange.js';
import { agentJobSchema, type AgentJob } from './job.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { startHttpSpan } from './http-span.js';

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

/** The routes of the calls, as the HTTP spans' `url.template` (after the base path). */
const TEMPLATES = {
  send: '/v2/agent/{projectId}/job/{id}/message',
  get: '/v2/agent/{projectId}/job/{id}',
  create: '/v2/agent/{projectId}/job',
} as const;

/** Bearer tokens are token68 characters in practice; anything else would break the header. */
const API_KEY_SHAPE = /^[\x21-\x7e]+$/;

/**
 * The one HTTP client of the agent API, with one keep-alive undici `Pool` for its origin.
 *
 * No retries happen here, neither undici's (no retry interceptor, pipelining 1 so undici never
 * re-dispatches a request after a head-of-line failure) nor our own: BullMQ attempts own every
 * retry, decided by the consumer's classifier, and two layers of retries would multiply each
 * other and could resend a prompt the API may already have received.
 */
export class AgentApiClient {
  readonly #pool: Pool;
  readonly #origin: string;
  readonly #basePath: string;
  #getHeaders: Readonly<Record<string, string>> = {};
  #sendHeaders: Readonly<Record<string, string>> = {};
  /** Every key this client has used: a server may echo an old one after a rotation. */
  readonly #keys = new Set<string>();
  readonly #scrub = (text: string) => {
    let scrubbed = text;
    for (const key of this.#keys) scrubbed = scrubbed.split(key).join('[redacted]');
    return scrubbed;
  };
  readonly #logger: Logger | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: AgentApiClientOptions) {
    const url = new URL(options.baseUrl);
    this.#origin = url.origin;
    this.#basePath = url.pathname.replace(/\/+$/, '');
    this.setApiKey(options.apiKey);
    this.#logger = options.logger;
    this.#pool = new Pool(url.origin, {
      connections: options.connections ?? DEFAULT_CONNECTIONS,
      pipelining: 1,
      connect: { timeout: options.connectTimeoutMs },
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.requestTimeoutMs,
    });
  }

  /**
   * Sends a follow-up: `POST {base}/v2/agent/{projectId}/job/{jobId}/message` with
   * `{"prompt": prompt}`. Resolves with the job as the 2xx response shows it, which may still be
   * the previous run's terminal state (the send is processed asynchronously).
   *
   * Rejects with {@link AgentApiError}. Code `bad_response` means the server answered 2xx, so
   * the message **was accepted** even though the body is unusable; `ambiguous: true` means the
   * outcome is unknown and must be settled from the job's status before any resend.
   */
  async sendMessage(
    projectId: string,
    jobId: string,
    prompt: string,
    options: CallOptions = {},
  ): Promise<AgentJob> {
    const path = `${this.#jobPath(projectId, jobId)}/message`;
    const body = JSON.stringify({ prompt });
    const request = { method: 'POST', path, body, headers: this.#sendHeaders } as const;
    return this.#call('send', projectId, jobId, request, options.signal, options.writeBy);
  }

  /**
   * Creates a job: `POST {base}/v2/agent/{projectId}/job` with `{"prompt": prompt}`; resolves
   * with the new job (201). Fails as {@link sendMessage} does, with the same meanings.
   */
  async createJob(projectId: string, prompt: string, options: CallOptions = {}): Promise<AgentJob> {
    const path = `${this.#basePath}/v2/agent/${segment('projectId', projectId)}/job`;
    const body = JSON.stringify({ prompt });
    const request = { method: 'POST', path, body, headers: this.#sendHeaders } as const;
    return this.#call('create', projectId, '', request, options.signal, options.writeBy);
  }

  /** Reads a job: `GET {base}/v2/agent/{projectId}/job/{jobId}`. Rejects with {@link AgentApiError}. */
  async getJob(projectId: string, jobId: string, options: CallOptions = {}): Promise<AgentJob> {
    const request = {
      method: 'GET',
      path: this.#jobPath(projectId, jobId),
      headers: this.#getHeaders,
    } as const;
    return this.#call('get', projectId, jobId, request, options.signal);
  }

  /**
   * Uses `apiKey` from the next call on (a rotated key); calls in flight keep the old one. The
   * connections stay: the key is a header, not part of the connection.
   */
  setApiKey(apiKey: string): void {
    if (!API_KEY_SHAPE.test(apiKey)) {
      // The message must not echo the key, not even a malformed one.
      throw new TypeError('apiKey must be a non-empty string of visible ASCII characters');
    }
    this.#keys.add(apiKey);
    this.#getHeaders = { authorization: `Bearer ${apiKey}`, accept: 'application/json' };
    this.#sendHeaders = { ...this.#getHeaders, 'content-type': 'application/json' };
  }

  /** Closes the pool once in-flight calls finish. Idempotent: a second call returns the same promise. */
  close(): Promise<void> {
    this.#closing ??= this.#pool.close().then(() => undefined);
    return this.#closing;
  }

  async #call(
    op: Operation,
    projectId: string,
    jobId: string,
    request: Dispatcher.DispatchOptions,
    signal: AbortSignal | undefined,
    writeBy?: number,
  ): Promise<AgentJob> {
    const startedAt = performance.now();
    const outcome = await this.#exchange(op, request, signal, writeBy);
    const ms = Math.round(performance.now() - startedAt);
    try {
      const job = this.#interpret(op, outcome);
      this.#logger?.debug(
        { op, projectId, jobId, status: outcome.ok ? outcome.status : undefined, ms },
        LIFECYCLE.agentApiCall,
      );
      return job;
    } catch (err) {
      this.#logger?.debug({ op, projectId, jobId, ms, err }, LIFECYCLE.agentApiCallFailed);
      throw err;
    }
  }

  /** One exchange in its HTTP client span; a traced request carries the span's `traceparent`. */
  async #exchange(
    op: Operation,
    request: Dispatcher.DispatchOptions,
    signal: AbortSignal | undefined,
    writeBy: number | undefined,
  ): Promise<ExchangeResult> {
    const span = startHttpSpan(() => ({
      method: op === 'get' ? 'GET' : 'POST',
      template: `${this.#basePath}${TEMPLATES[op]}`,
      url: new URL(request.path, this.#origin),
    }));
    const traceparent = span?.traceparent;
    const outcome = await exchange(
      this.#pool,
      traceparent ? { ...request, headers: { ...request.headers, traceparent } } : request,
      signal,
      writeBy,
    ).catch((err: unknown) => {
      span?.end({ status: undefined, cause: err });
      throw err;
    });
    span?.end(outcome.ok ? outcome : { status: outcome.status, cause: outcome.cause });
    return outcome;
  }

  #interpret(op: Operation, outcome: ExchangeResult): AgentJob {
    if (!outcome.ok) {
      const { status, cause } = outcome;
      if (status === undefined) {
        throw errorFromTransport(op, cause, outcome.written, outcome.aborted);
      }
      // The status line arrived and then the body failed: the status alone says what happened.
      if (isSuccess(status)) throw badResponse(op, status, cause);
      throw errorFromStatus(op, status, outcome.headers, '', this.#scrub, cause);
    }
    // Scrubbed before anything reads it: a server or gateway may echo our Authorization header,
    // and JSON.parse quotes the start of a body it cannot read in its error message.
    const text = this.#scrub(outcome.body.toString('utf8'));
    if (!isSuccess(outcome.status)) {
      throw errorFromStatus(op, outcome.status, outcome.headers, text, this.#scrub);
    }
    let json: unknown;
    try {
      // Scrubbed again once parsed: JSON escapes (\u0073...) hide the key from the text scrub.
      // Without a backslash in the text there is no escape, and every parsed string is a piece
      // of the scrubbed text already.
      const parsed: unknown = JSON.parse(text);
      json = text.includes('\\') ? scrubStrings(parsed, this.#scrub) : parsed;
    } catch (err) {
      throw badResponse(op, outcome.status, err);
    }
    const parsed = agentJobSchema.safeParse(json);
    if (!parsed.success) throw badResponse(op, outcome.status, parsed.error);
    return parsed.data;
  }

  #jobPath(projectId: string, jobId: string): string {
    return `${this.#basePath}/v2/agent/${segment('projectId', projectId)}/job/${segment('jobId', jobId)}`;
  }
}
