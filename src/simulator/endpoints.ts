import type { AgentJob } from '../agent-api/index.js';
import { formatDuration } from '../config/units.js';
import { malformed, type FaultDice } from './faults.js';
import { json, jsonError, type SimulatedResponse, type Route } from './http.js';
import type { JobStore } from './jobs.js';
import type { Delivery, RecordedRequest } from './options.js';
import type { SendWindows } from './send-window.js';

/**
 * What the simulated API does with one request, in the order a real gateway and API would:
 * injected gateway faults, the bearer check, routing, body validation, the job lookup, the send
 * limit, then processing and the faults that hit after processing (timeout, reset, malformed body).
 */

/** A 429 forced on one project by {@link Simulator.rateLimitProject}. */
export interface ForcedLimit {
  readonly until: number;
  readonly retryAfter: boolean | undefined;
  readonly plainText: boolean | undefined;
}

/** The simulator state the endpoints read and change. */
export interface EndpointState {
  /** The one `Authorization` header accepted; {@link Simulator.setApiKey} replaces it. */
  authorization: string;
  readonly jobs: JobStore;
  readonly windows: SendWindows;
  readonly dice: FaultDice;
  readonly autoCreateJobs: boolean;
  readonly forcedLimits: ReadonlyMap<string, ForcedLimit>;
  deliver(delivery: Delivery): void;
}

/** How to answer: write a reply, leave the request hanging, or reset the socket. */
export type Decision =
  | { readonly kind: 'reply'; readonly reply: SimulatedResponse }
  | { readonly kind: 'hang' }
  | { readonly kind: 'reset' };

/** The status shown by the unknown-status fault: a value the OpenAPI document does not list. */
export const UNKNOWN_STATUS = 'queued_v3';

/** Decides the answer to one request and updates `record` (authorized, prompt, processed, fault). */
export function answer(
  state: EndpointState,
  route: Route,
  authorization: string | undefined,
  body: Buffer,
  record: RecordedRequest,
  now: number,
): Decision {
  const gateway = state.dice.gatewayFault();
  if (gateway) {
    record.fault = gateway.fault;
    return reply(gateway.reply);
  }
  record.authorized = authorization === state.authorization;
  if (!record.authorized) return reply(jsonError(401, 'missing or invalid API key'));
  const { projectId, jobId } = route;
  if (route.kind === 'create' && projectId !== undefined)
    return create(state, projectId, body, record, now);
  if (route.kind === 'other' || projectId === undefined || jobId === undefined) {
    return reply(jsonError(404, 'no such endpoint'));
  }
  if (route.kind === 'get') return get(state, projectId, jobId, record, now);
  return send(state, projectId, jobId, body, record, now);
}

function send(
  state: EndpointState,
  projectId: string,
  jobId: string,
  body: Buffer,
  record: RecordedRequest,
  now: number,
): Decision {
  const prompt = promptOf(body);
  if (typeof prompt !== 'string') return reply(prompt);
  record.prompt = prompt;
  if (!ensureJob(state, projectId, jobId)) return reply(jsonError(404, 'job not found'));
  const limited = rateLimited(state, projectId, now);
  if (limited) return reply(limited);
  state.windows.record(projectId, now);
  state.jobs.accept(projectId, jobId, prompt, now);
  state.deliver({ at: now, projectId, jobId, prompt });
  record.processed = true;
  const fault = faultAfterProcessing(state, record);
  if (fault) return fault;
  return jobReply(state, state.jobs.view(projectId, jobId, now), record);
}

/**
 * Creates a job whose first run starts at once, as an accepted follow-up's does; its creation
 * counts in the project's send window (the document gives both the same figure).
 */
function create(
  state: EndpointState,
  projectId: string,
  body: Buffer,
  record: RecordedRequest,
  now: number,
): Decision {
  const prompt = promptOf(body);
  if (typeof prompt !== 'string') return reply(prompt);
  record.prompt = prompt;
  const limited = rateLimited(state, projectId, now);
  if (limited) return reply(limited);
  state.windows.record(projectId, now);
  const jobId = state.jobs.create(projectId, prompt, now);
  record.jobId = jobId;
  state.deliver({ at: now, projectId, jobId, prompt, kind: 'create' });
  record.processed = true;
  const fault = faultAfterProcessing(state, record);
  if (fault) return fault;
  const decision = jobReply(state, state.jobs.view(projectId, jobId, now), record);
  if (decision.kind === 'reply' && decision.reply.status === 200)
    return reply({ ...decision.reply, status: 201 });
  return decision;
}

/** A processed POST's answer lost to a fault (a hang or a reset), as the dice fall; else none. */
function faultAfterProcessing(state: EndpointState, record: RecordedRequest): Decision | undefined {
  const faults = state.dice.current;
  if (state.dice.hit(faults.timeoutRate)) {
    record.fault = 'timeout';
    return { kind: 'hang' };
  }
  if (state.dice.hit(faults.resetRate)) {
    record.fault = 'reset';
    return { kind: 'reset' };
  }
  return undefined;
}

function get(
  state: EndpointState,
  projectId: string,
  jobId: string,
  record: RecordedRequest,
  now: number,
): Decision {
  if (!ensureJob(state, projectId, jobId)) return reply(jsonError(404, 'job not found'));
  let job = state.jobs.view(projectId, jobId, now);
  if (job && state.dice.hit(state.dice.current.unknownStatusRate)) {
    job = { ...job, status: UNKNOWN_STATUS };
    record.fault = 'unknown-status';
  }
  return jobReply(state, job, record);
}

function jobReply(
  state: EndpointState,
  job: AgentJob | undefined,
  record: RecordedRequest,
): Decision {
  if (state.dice.hit(state.dice.current.malformedJsonRate)) {
    record.fault = 'malformed';
    return reply({ status: 200, body: malformed(job), contentType: 'application/json' });
  }
  return reply(json(200, job));
}

function ensureJob(state: EndpointState, projectId: string, jobId: string): boolean {
  if (state.jobs.has(projectId, jobId)) return true;
  if (!state.autoCreateJobs) return false;
  state.jobs.seed(projectId, jobId);
  return true;
}

/** The prompt of a send body, or the 400 answer (the document: a JSON object, `prompt` minLength 1). */
function promptOf(body: Buffer): string | SimulatedResponse {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return jsonError(400, 'request body must be a JSON object');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return jsonError(400, 'request body must be a JSON object');
  }
  const prompt: unknown = (parsed as { prompt?: unknown }).prompt;
  if (typeof prompt !== 'string' || prompt.length === 0) {
    return jsonError(400, 'prompt must be a non-empty string');
  }
  return prompt;
}

function rateLimited(
  state: EndpointState,
  projectId: string,
  now: number,
): SimulatedResponse | undefined {
  const faults = state.dice.current;
  const forced = state.forcedLimits.get(projectId);
  if (forced && now < forced.until) {
    const retryAfter = forced.retryAfter ?? faults.retryAfter;
    const plainText = forced.plainText ?? faults.plainText429;
    return tooMany(
      'rate limit exceeded for this project',
      forced.until - now,
      retryAfter,
      plainText,
    );
  }
  const decision = state.windows.check(projectId, now);
  if (decision.allowed) return undefined;
  const { max, windowMs } = state.windows;
  const message = `rate limit exceeded: ${max} sends per project per ${formatDuration(windowMs)}`;
  return tooMany(message, decision.retryAfterMs, faults.retryAfter, faults.plainText429);
}

function tooMany(
  message: string,
  waitMs: number,
  retryAfter: boolean,
  plainText: boolean,
): SimulatedResponse {
  const headers: Record<string, string> = retryAfter
    ? { 'retry-after': String(Math.ceil(waitMs / 1000)) }
    : {};
  if (plainText)
    return { status: 429, body: message, contentType: 'text/plain; charset=utf-8', headers };
  return jsonError(429, message, headers);
}

function reply(value: SimulatedResponse): Decision {
  return { kind: 'reply', reply: value };
}
