import type { Logger } from 'pino';
import type { Dispatcher, Pool } from 'undici';
import { z } from 'zod';
import { LIFECYCLE } from '../telemetry/names.js';
import { activeTracer } from '../telemetry/trace-context.js';
import { AgentApiError, badResponse, errorFromStatus, type Operation } from './errors.js';
import { exchange, type ExchangeResult } from './exchange.js';
import { exchangeInSpan, type HttpCall } from './http-span.js';
import { keyHeaders, scrubStrings, type KeyHeaders } from './api-key.js';
import { poolFor, type AgentApiClientOptions, type CallOptions } from './options.js';
import { errorOfFailure } from './transport-errors.js';

/**
 * The agent job as the vendor's OpenAPI document describes it (`components.schemas.AgentJob`),
 * and the one HTTP client of the agent API, which answers with it.
 *
 * The document marks no field required, so none is required here. Unknown fields are tolerated
 * and dropped (`z.object` strips them), also inside `source`: the job is stored in the dispatch
 * record and echoed in the completion event, so only the contract's fields may reach Redis, never
 * whatever else a server or a gateway put in the body. `status` is any string: a value outside
 * `JOB_STATUSES` is reported by `statusKind` as `'unknown'`, never as a parse failure,
 * so a new vendor status cannot crash a role (contract, section 1).
 */

/** Every status the OpenAPI document lists, in its order. */
export const JOB_STATUSES = ['active', 'completed', 'archived', 'failed'] as const;

/** Statuses after which the agent does no more work on the job's current run. */
export const TERMINAL_STATUSES = ['completed', 'archived', 'failed'] as const;

/** One documented status. */
export type JobStatus = (typeof JOB_STATUSES)[number];

/** One terminal status. */
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** Where the agent works: the repository URL and the branch (`ref`, nullable). */
export const jobSourceSchema = z.object({
  repository: z.string().optional(),
  ref: z.string().nullable().optional(),
});

/** Parser of an agent job body; see above for what it tolerates. */
export const agentJobSchema = z.object({
  id: z.string().optional(),
  status: z.string().optional(),
  source: jobSourceSchema.optional(),
  model: z.string().optional(),
  // `format: uri` in the document; kept as a plain string so an odd link never fails a parse.
  prLink: z.string().nullable().optional(),
  createdAt: z.string().optional(),
  archivedAt: z.string().nullable().optional(),
});

/** An agent job as parsed from the API: the contract's fields only. */
export type AgentJob = z.infer<typeof agentJobSchema>;

const TERMINAL: ReadonlySet<string> = new Set(TERMINAL_STATUSES);

/**
 * Sorts a status into what the poller acts on: `'active'` (still working), `'terminal'` (the run
 * ended) or `'unknown'` (missing, or a value the OpenAPI document does not list: log it and keep
 * polling, never crash).
 */
export function statusKind(status: string | undefined): 'active' | 'terminal' | 'unknown' {
  if (status === 'active') return 'active';
  if (status !== undefined && TERMINAL.has(status)) return 'terminal';
  return 'unknown';
}

/** Whether `status` is one of {@link TERMINAL_STATUSES}. */
export function isTerminalStatus(status: string | undefined): status is TerminalStatus {
  return status !== undefined && TERMINAL.has(status);
}

/**
 * The one HTTP client of the agent API, with one keep-alive undici `Pool` for its origin. A call
 * is one exchange (`exchange.ts`; in its HTTP client span when a tracer is registered,
 * `http-span.ts`), its answer read here as an agent job; how one fails is `transport-errors.ts`
 * (no complete answer) and `errors.ts` (an error status).
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
  #headers: KeyHeaders;
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
    this.#headers = keyHeaders(options.apiKey);
    this.#keys.add(options.apiKey);
    this.#logger = options.logger;
    this.#pool = poolFor(url.origin, options);
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
    const request = { method: 'POST', path, body, headers: this.#headers.send } as const;
    return this.#call('send', projectId, jobId, request, options.signal, options.writeBy);
  }

  /**
   * Creates a job: `POST {base}/v2/agent/{projectId}/job` with `{"prompt": prompt}`; resolves
   * with the new job (201). Fails as {@link sendMessage} does, with the same meanings.
   */
  async createJob(projectId: string, prompt: string, options: CallOptions = {}): Promise<AgentJob> {
    const path = `${this.#basePath}/v2/agent/${segment('projectId', projectId)}/job`;
    const body = JSON.stringify({ prompt });
    const request = { method: 'POST', path, body, headers: this.#headers.send } as const;
    return this.#call('create', projectId, '', request, options.signal, options.writeBy);
  }

  /** Reads a job: `GET {base}/v2/agent/{projectId}/job/{jobId}`. Rejects with {@link AgentApiError}. */
  async getJob(projectId: string, jobId: string, options: CallOptions = {}): Promise<AgentJob> {
    const request = {
      method: 'GET',
      path: this.#jobPath(projectId, jobId),
      headers: this.#headers.get,
    } as const;
    return this.#call('get', projectId, jobId, request, options.signal);
  }

  /**
   * Uses `apiKey` from the next call on (a rotated key); calls in flight keep the old one. The
   * connections stay: the key is a header, not part of the connection.
   */
  setApiKey(apiKey: string): void {
    this.#headers = keyHeaders(apiKey);
    this.#keys.add(apiKey);
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
    const tracer = activeTracer();
    const outcome = await (tracer
      ? exchangeInSpan(tracer, this.#httpCall(op, request), this.#pool, request, signal, writeBy)
      : exchange(this.#pool, request, signal, writeBy));
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

  #interpret(op: Operation, outcome: ExchangeResult): AgentJob {
    if (!outcome.ok) throw errorOfFailure(op, outcome, this.#scrub);
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

  /** A traced call, as its HTTP client span describes it. */
  #httpCall(op: Operation, request: Dispatcher.DispatchOptions): HttpCall {
    return { op, basePath: this.#basePath, url: new URL(request.path, this.#origin) };
  }

  #jobPath(projectId: string, jobId: string): string {
    return `${this.#basePath}/v2/agent/${segment('projectId', projectId)}/job/${segment('jobId', jobId)}`;
  }
}

/** Whether an HTTP status is a 2xx. */
function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/**
 * One encoded path segment. `.` and `..` are encoded too, because a proxy that normalises dot
 * segments would otherwise send the call to another path.
 */
function segment(name: string, value: string): string {
  if (value === '') {
    throw new AgentApiError(`agent API call needs a non-empty ${name}`, {
      code: 'bad_request',
      ambiguous: false,
    });
  }
  const encoded = encodeURIComponent(value);
  return encoded === '.' || encoded === '..' ? encoded.replaceAll('.', '%2E') : encoded;
}
