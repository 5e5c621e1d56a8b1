import type { Logger } from 'pino';
import type { AgentJob } from '../agent-api/index.js';

/**
 * The simulator's public shapes and defaults: a real HTTP server for both agent-API endpoints of
 * the vendor's OpenAPI document, with the faults the client must survive.
 */

/** What the agent run ends as: `completed` opens a pull request, `completed_no_pr` changes nothing. */
export type RunEnding = 'completed' | 'completed_no_pr' | 'failed' | 'archived';

/** Injected failures. Rates are shares from 0 to 1, drawn independently per request. */
export interface Faults {
  /** Share of requests answered 500/502/503 without processing them. */
  serverErrorRate: number;
  /** Share of sends read and processed (the prompt counts as delivered) but never answered. */
  timeoutRate: number;
  /** Share of sends read and processed, then the socket reset. */
  resetRate: number;
  /** Delay before answering: a fixed number or a uniform `[min, max]` range. */
  latencyMs: number | [number, number];
  /** Further delay before answering a send (POST) only: a slow API whose status reads stay quick. */
  sendLatencyMs: number;
  /** 429 bodies as `text/plain` instead of JSON `{"error"}`. */
  plainText429: boolean;
  /** 429 carries `Retry-After` in whole seconds, rounded up. */
  retryAfter: boolean;
  /** Share of 200 answers with a broken JSON body (the request was processed). */
  malformedJsonRate: number;
  /** Share of requests answered 502 with an HTML page, not processed. */
  htmlErrorRate: number;
  /** Share of GET answers showing an undocumented status such as `queued_v3` (the job is unchanged). */
  unknownStatusRate: number;
  /** Writes 200 bodies in two chunks this far apart (0: one chunk). */
  slowBodyMs: number;
}

/** No faults: the default. */
export const NO_FAULTS: Readonly<Faults> = Object.freeze({
  serverErrorRate: 0,
  timeoutRate: 0,
  resetRate: 0,
  latencyMs: 0,
  sendLatencyMs: 0,
  plainText429: false,
  retryAfter: false,
  malformedJsonRate: 0,
  htmlErrorRate: 0,
  unknownStatusRate: 0,
  slowBodyMs: 0,
});

/** How to start a simulator. Every field but `apiKey` has a default. */
export interface SimulatorOptions {
  /** The bearer key every request must carry. */
  apiKey: string;
  /** @defaultValue 0 (a free port) */
  port?: number;
  /** @defaultValue '127.0.0.1' */
  host?: string;
  /** Accepted sends per project in a sliding window; over it a send gets 429. @defaultValue 100 per hour */
  sendLimit?: { max: number; windowMs: number };
  /** How long a run takes after it shows `active`. @defaultValue 200 */
  workTimeMs?: number | ((projectId: string, jobId: string) => number);
  /** How a run ends. @defaultValue always `'completed'` with a pull request */
  outcome?: (projectId: string, jobId: string, prompt: string) => RunEnding;
  /** After a send, the job keeps showing its previous status this long. @defaultValue 0 */
  staleTerminalMs?: number;
  /** An unknown job is created on first use instead of answering 404 (benchmarks). @defaultValue false */
  autoCreateJobs?: boolean;
  /** @defaultValue {@link NO_FAULTS} */
  faults?: Partial<Faults>;
  /** Source of randomness for faults; tests pass a seeded one. @defaultValue Math.random */
  random?: () => number;
  /** Request records kept before the oldest are dropped (deliveries are always kept). @defaultValue 1_000_000 */
  maxRecords?: number;
  /** Receives one debug line per request. */
  logger?: Logger;
}

/** Defaults of {@link SimulatorOptions}, in one place. */
export const SIMULATOR_DEFAULTS = Object.freeze({
  port: 0,
  host: '127.0.0.1',
  sendLimit: Object.freeze({ max: 100, windowMs: 3_600_000 }),
  workTimeMs: 200,
  staleTerminalMs: 0,
  maxRecords: 1_000_000,
});

/** What the simulator saw of one request. */
export interface RecordedRequest {
  seq: number;
  /** `Date.now()` when the request body was fully read. */
  at: number;
  method: string;
  path: string;
  kind: 'send' | 'get' | 'create' | 'other';
  projectId?: string;
  jobId?: string;
  prompt?: string;
  authorized: boolean;
  /** The response status; 0 when no response was sent (timeout or reset fault). */
  status: number;
  /** For sends: the prompt was accepted into the job. */
  processed: boolean;
  /** The fault injected into this request, if any. */
  fault?: string;
}

/** One prompt the simulated agent accepted. */
export interface Delivery {
  at: number;
  projectId: string;
  jobId: string;
  prompt: string;
  /** `create`: the prompt created the job (POST …/job); absent: a follow-up. */
  kind?: 'create';
}

/** A running simulator. */
export interface Simulator {
  /** `http://HOST:PORT`, the `{base_url}` for the client. */
  readonly url: string;
  readonly requests: readonly RecordedRequest[];
  /** Every prompt accepted, in order. */
  readonly deliveries: readonly Delivery[];
  /** Creates or replaces a job; default status `completed` with a source, model and createdAt. */
  seedJob(projectId: string, jobId: string, fields?: Partial<AgentJob>): AgentJob;
  /** The job as a GET would show it now (without faults), or `undefined`. */
  getJob(projectId: string, jobId: string): AgentJob | undefined;
  setFaults(faults: Partial<Faults>): void;
  /** Accepts `apiKey` from now on and answers 401 to the previous one (a rotated key). */
  setApiKey(apiKey: string): void;
  setStaleTerminalMs(ms: number): void;
  /** Answers 429 to every send for this project until `until` (epoch ms). */
  rateLimitProject(
    projectId: string,
    until: number,
    opts?: { retryAfter?: boolean; plainText?: boolean },
  ): void;
  /** GETs received, for one project, one job, or all. */
  countGets(projectId?: string, jobId?: string): number;
  /** Clears records, deliveries and counters; jobs stay. */
  reset(): void;
  /** Stops listening, destroys open sockets (hung requests) and clears every timer. */
  close(): Promise<void>;
}
