import type { AgentJob } from '../agent-api/index.js';
import { EVENT_TYPES, type EventType } from '../telemetry/names.js';

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
  readonly jobId: string;
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
  /** Back in `queued` for an operator-approved resend, waiting for its new BullMQ job. */
  readonly resendPending: boolean;
  readonly pollDelayMs: number | undefined;
  readonly polls: number;
  readonly type: EventType | undefined;
  readonly reason: string | undefined;
}

/**
 * Parses a dispatch hash (from HGETALL); `undefined` when the hash is empty or not ours. Every
 * state but `done` carries its prompt; a finished record keeps the rest for `DISPATCH_RETENTION`,
 * so `status` still answers after the end.
 */
export function parseRecord(
  dispatchId: string,
  hash: Record<string, string>,
): DispatchRecord | undefined {
  const { projectId, jobId, prompt, state, enqueuedAt } = hash;
  if (!projectId || !jobId || !state || !enqueuedAt) return undefined;
  if (!Object.values(STATES).includes(state as DispatchState)) return undefined;
  if (prompt === undefined && state !== STATES.done) return undefined;
  return {
    dispatchId,
    projectId,
    jobId,
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
    resendPending: hash['resend'] === '1',
    pollDelayMs: optionalNumber(hash['pollDelayMs']),
    polls: Number(hash['polls'] ?? 0),
    type: (hash['type'] || undefined) as EventType | undefined,
    reason: hash['reason'] || undefined,
  };
}

/** The event type of a terminal status (contract, section 5). */
export function eventTypeOf(status: 'completed' | 'archived' | 'failed'): EventType {
  return {
    completed: EVENT_TYPES.completed,
    archived: EVENT_TYPES.archived,
    failed: EVENT_TYPES.failed,
  }[status];
}

/** How a dispatch ends: its event type, and for endings of ours, why. */
export interface Ending {
  readonly type: EventType;
  readonly reason?: string;
  /** The last agent job seen, if it changed since the record was read. */
  readonly job?: AgentJob;
}

/** The stream entry's fields (contract, section 5), all strings, in order. */
export function eventFields(record: DispatchRecord, ending: Ending, finishedAt: number): string[] {
  const job = ending.job ?? record.job;
  const event = {
    dispatchId: record.dispatchId,
    projectId: record.projectId,
    jobId: record.jobId,
    key: record.key ?? null,
    meta: record.meta ?? null,
    job: job ?? null,
    reason: ending.reason ?? null,
    enqueuedAt: iso(record.enqueuedAt),
    sentAt: record.sentAt === undefined ? null : iso(record.sentAt),
    finishedAt: iso(finishedAt),
    attempts: record.attempts,
  };
  const status = record.state === STATES.queued ? '' : (job?.status ?? record.lastStatus ?? '');
  return [
    'type',
    ending.type,
    'dispatchId',
    record.dispatchId,
    'projectId',
    record.projectId,
    'jobId',
    record.jobId,
    'status',
    status,
    'prLink',
    typeof job?.prLink === 'string' ? job.prLink : '',
    'event',
    JSON.stringify(event),
    'v',
    '1',
  ];
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
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
