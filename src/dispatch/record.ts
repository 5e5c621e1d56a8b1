import type { AgentJob } from '../agent-api/index.js';
import type { EventType } from './event.js';

/**
 * The states of a dispatch. The record in Redis is the source of truth; BullMQ's job is only the
 * vehicle that gets it to a worker.
 *
 * queued ──acquire──▶ sending ──200──▶ sent ──terminal──▶ done
 *   ▲                   │  └─timeout/reset/crash─▶ unsettled ──settled──▶ sent | done
 *   └──429, 5xx, refused┘
 */
export const STATES = {
  /** Waiting for its lane, its project's budget, or a worker. */
  queued: 'queued',
  /** Intent recorded, request in flight. A rerun that finds this state knows a worker died. */
  sending: 'sending',
  /** The API accepted it; the poller tracks the job's run. */
  sent: 'sent',
  /** The request may or may not have reached the API; the poller settles it from the job's status. */
  unsettled: 'unsettled',
  /** Its terminal event is on the stream. */
  done: 'done',
} as const;

export type DispatchState = (typeof STATES)[keyof typeof STATES];

/** A dispatch as stored in its Redis hash, parsed. Times are epoch milliseconds. */
export interface DispatchRecord {
  readonly dispatchId: string;
  readonly projectId: string;
  /** Its lane: the agent job, or for a creation and what is chained to it, `createdLane(...)`. */
  readonly jobId: string;
  /** `create`: it creates an agent job (see `creation.ts`); absent: a follow-up. */
  readonly kind?: 'create' | undefined;
  /** The creation (its dispatch id) a chained follow-up waits for. */
  readonly after?: string | undefined;
  /** The agent job it went to when that is not `jobId`: a creation's new job, a chained one's. */
  readonly target?: string | undefined;
  /** The prompt; FINISH deletes it, so a `done` record has none. */
  readonly prompt: string | undefined;
  readonly key: string | undefined;
  readonly meta: Record<string, unknown> | undefined;
  readonly state: DispatchState;
  readonly enqueuedAt: number;
  readonly sentAt: number | undefined;
  /** When the latest attempt recorded its intent to send (ACQUIRE). */
  readonly sendingAt: number | undefined;
  /** The token of the attempt that recorded the latest intent: only it may record its outcome. */
  readonly attemptToken: string | undefined;
  readonly finishedAt: number | undefined;
  /** Send attempts that reached the point of writing a request. */
  readonly attempts: number;
  readonly job: AgentJob | undefined;
  readonly lastStatus: string | undefined;
  /** The job was seen `active` after this follow-up's send. */
  readonly seenActive: boolean;
  /** When a read last saw the job active (Redis's clock): where its run's end is bounded from. */
  readonly activeAt?: number | undefined;
  /**
   * The send (its `sentAt`) whose run its project's history was told had gone on past where the
   * history expected runs to end: told once per send.
   */
  readonly overran?: number | undefined;
  /** The BullMQ job that carries it, when a resend or a repair replaced the first one. */
  readonly bullJobId?: string | undefined;
  /** Back in `queued` for an operator-approved resend, waiting for its new BullMQ job. */
  readonly resendPending: boolean;
  readonly pollDelayMs: number | undefined;
  readonly polls: number;
  readonly type: EventType | undefined;
  readonly reason: string | undefined;
  /** W3C trace context of the producer's `send dispatch`, when it was traced. */
  readonly traceparent?: string | undefined;
  /** Its deadline (`ttl` or `expiresAt`, see `deadline.ts`): not sent after it. */
  readonly expiresAt?: number | undefined;
  /** The dead letter this follow-up redrives (written by the redrive, see producer/redrive.ts). */
  readonly redriveOf?: string | undefined;
  /** The follow-up that redrives this dead letter. */
  readonly redrivenTo?: string | undefined;
}

/**
 * The fields of a record {@link parseRecord} reads, but the prompt: what the poller reads (HMGET)
 * to act on a status and publish the event, whatever the prompt's size.
 */
export const FIELDS_BUT_PROMPT = [
  'projectId',
  'jobId',
  'state',
  'enqueuedAt',
  'key',
  'meta',
  'sentAt',
  'sendingAt',
  'attemptToken',
  'finishedAt',
  'attempts',
  'job',
  'lastStatus',
  'seenActive',
  'activeAt',
  'overran',
  'resend',
  'pollDelayMs',
  'polls',
  'type',
  'reason',
  'traceparent',
  'expiresAt',
  'kind',
  'after',
  'target',
] as const;

/**
 * Parses a dispatch hash (from HGETALL, or the {@link FIELDS_BUT_PROMPT} when `withPrompt` is
 * false); `undefined` when the hash is empty or not ours. Every state but `done` carries its
 * prompt; a finished record keeps the rest for `DISPATCH_RETENTION`, so `status` still answers
 * after the end.
 */
export function parseRecord(
  dispatchId: string,
  hash: Record<string, string>,
  withPrompt = true,
): DispatchRecord | undefined {
  const { projectId, jobId, prompt, state, enqueuedAt } = hash;
  if (!projectId || !jobId || !state || !enqueuedAt) return undefined;
  if (!Object.values(STATES).includes(state as DispatchState)) return undefined;
  if (withPrompt && prompt === undefined && state !== STATES.done) return undefined;
  return {
    dispatchId,
    projectId,
    jobId,
    kind: hash['kind'] === 'create' ? 'create' : undefined,
    after: hash['after'] || undefined,
    target: hash['target'] || undefined,
    prompt,
    key: hash['key'] || undefined,
    meta: parseJson(hash['meta']) as Record<string, unknown> | undefined,
    state: state as DispatchState,
    enqueuedAt: Number(enqueuedAt),
    sentAt: optionalNumber(hash['sentAt']),
    sendingAt: optionalNumber(hash['sendingAt']),
    attemptToken: hash['attemptToken'] || undefined,
    finishedAt: optionalNumber(hash['finishedAt']),
    attempts: Number(hash['attempts'] ?? 0),
    job: parseJson(hash['job']) as AgentJob | undefined,
    lastStatus: hash['lastStatus'] || undefined,
    seenActive: hash['seenActive'] === '1',
    activeAt: optionalNumber(hash['activeAt']),
    overran: optionalNumber(hash['overran']),
    bullJobId: hash['bullJobId'] || undefined,
    resendPending: hash['resend'] === '1',
    pollDelayMs: optionalNumber(hash['pollDelayMs']),
    polls: Number(hash['polls'] ?? 0),
    type: (hash['type'] || undefined) as EventType | undefined,
    reason: hash['reason'] || undefined,
    traceparent: hash['traceparent'] || undefined,
    expiresAt: optionalNumber(hash['expiresAt']),
    redriveOf: hash['redriveOf'] || undefined,
    redrivenTo: hash['redrivenTo'] || undefined,
  };
}

function optionalNumber(text: string | undefined): number | undefined {
  return text === undefined || text === '' ? undefined : Number(text);
}

function parseJson(text: string | undefined): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
