import type { AgentJob } from '../agent-api/index.js';
import { agentJobOf, createdLane, isCreation } from './creation.js';

/**
 * The completion event (contract, section 5): its types, and the one builder of the stream
 * entry's fields, for a dispatch that ends (FINISH) and for a BullMQ job without a record
 * (the orphan event).
 */

/** Completion-event `type` values (contract, section 5). */
export const EVENT_TYPES = {
  completed: 'followup.completed',
  failed: 'followup.failed',
  archived: 'followup.archived',
  timedOut: 'followup.timed_out',
  undeliverable: 'followup.undeliverable',
  /** An operator cancelled it before it was sent (`cancel`). */
  cancelled: 'followup.cancelled',
  /** Its deadline (`ttl`, `expiresAt`) passed before its turn: not sent, no budget spent. */
  expired: 'followup.expired',
} as const;

/** A creation's event types: the same endings, named `job.` (see `creation.ts`). */
export const JOB_EVENT_TYPES = {
  completed: 'job.completed',
  failed: 'job.failed',
  archived: 'job.archived',
  timedOut: 'job.timed_out',
  undeliverable: 'job.undeliverable',
  cancelled: 'job.cancelled',
  expired: 'job.expired',
} as const;

/** How a follow-up ends; a creation's ending is named after it (`endingTypeOf`). */
export type FollowUpEventType = (typeof EVENT_TYPES)[keyof typeof EVENT_TYPES];
export type EventType = FollowUpEventType | (typeof JOB_EVENT_TYPES)[keyof typeof JOB_EVENT_TYPES];

/** Every event type, a follow-up's then a creation's. */
export const ALL_EVENT_TYPES: readonly EventType[] = [
  ...Object.values(EVENT_TYPES),
  ...Object.values(JOB_EVENT_TYPES),
];

/** The type of the event that ends `record` as `type` says: a creation's is `job.`. */
export function endingTypeOf(record: { readonly kind?: 'create' | undefined }, type: EventType) {
  return record.kind === 'create' ? (type.replace(/^followup\./, 'job.') as EventType) : type;
}

/** The event type of a terminal status (contract, section 5). */
export function eventTypeOf(status: 'completed' | 'archived' | 'failed'): FollowUpEventType {
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

/** What the event of a dispatch tells of its record (a `DispatchRecord` is one). */
export interface EventRecord {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly key: string | undefined;
  readonly meta: Record<string, unknown> | undefined;
  readonly state: string;
  readonly job: AgentJob | undefined;
  readonly lastStatus: string | undefined;
  readonly enqueuedAt: number;
  readonly sentAt: number | undefined;
  readonly attempts: number;
  /** The W3C trace context the event carries, so its consumers can continue the trace. */
  readonly traceparent?: string | undefined;
  /** Its deadline, when it has one. */
  readonly expiresAt?: number | undefined;
  /** A creation's and a chained follow-up's: see `agentJobOf` (`creation.ts`). */
  readonly kind?: 'create' | undefined;
  readonly after?: string | undefined;
  readonly target?: string | undefined;
}

/** Everything an event says. Times are epoch milliseconds. */
interface EventFacts {
  readonly type: EventType;
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly key: string | null;
  readonly meta: Record<string, unknown> | null;
  readonly job: AgentJob | null;
  readonly status: string;
  readonly reason: string | null;
  readonly enqueuedAt: number | null;
  readonly sentAt: number | null;
  readonly finishedAt: number;
  readonly attempts: number;
  readonly expiresAt: number | null;
  readonly traceparent?: string | undefined;
}

/** The stream entry's fields (contract, section 5), all strings, in order, as field/value pairs. */
function entryFields(facts: EventFacts): string[] {
  const event = {
    dispatchId: facts.dispatchId,
    projectId: facts.projectId,
    jobId: facts.jobId,
    key: facts.key,
    meta: facts.meta,
    job: facts.job,
    reason: facts.reason,
    enqueuedAt: iso(facts.enqueuedAt),
    sentAt: iso(facts.sentAt),
    finishedAt: iso(facts.finishedAt),
    attempts: facts.attempts,
    expiresAt: iso(facts.expiresAt),
  };
  return [
    'type',
    facts.type,
    'dispatchId',
    facts.dispatchId,
    'projectId',
    facts.projectId,
    'jobId',
    facts.jobId,
    'status',
    facts.status,
    'prLink',
    typeof facts.job?.prLink === 'string' ? facts.job.prLink : '',
    'event',
    JSON.stringify(event),
    // Only when the follow-up was traced (contract, section 5).
    ...(facts.traceparent ? ['traceparent', facts.traceparent] : []),
    'v',
    '1',
  ];
}

/** The fields of the event that ends `record` with `ending` at `finishedAt`. */
export function eventFields(record: EventRecord, ending: Ending, finishedAt: number): string[] {
  const job = ending.job ?? record.job;
  return entryFields({
    type: endingTypeOf(record, ending.type),
    dispatchId: record.dispatchId,
    projectId: record.projectId,
    jobId: agentJobOf(record),
    key: record.key ?? null,
    meta: record.meta ?? null,
    job: job ?? null,
    status: record.state === 'queued' ? '' : (job?.status ?? record.lastStatus ?? ''),
    reason: ending.reason ?? null,
    enqueuedAt: record.enqueuedAt,
    sentAt: record.sentAt ?? null,
    finishedAt,
    attempts: record.attempts,
    expiresAt: record.expiresAt ?? null,
    traceparent: record.traceparent,
  });
}

/**
 * The fields of the undeliverable event of BullMQ job `bullJobId`, which has no dispatch record:
 * it carries whatever ids its `payload` had, but a creation's lane for a jobId (no job known); a
 * creation's is `job.undeliverable`.
 */
export function orphanEventFields(
  bullJobId: string,
  payload: unknown,
  reason: string,
  finishedAt: number,
): string[] {
  const data = (typeof payload === 'object' && payload !== null ? payload : {}) as Record<
    string,
    unknown
  >;
  const text = (name: string) => (typeof data[name] === 'string' ? (data[name] as string) : '');
  const ref = { dispatchId: text('dispatchId') || bullJobId, jobId: text('jobId') };
  return entryFields({
    type: endingTypeOf(isCreation(ref) ? { kind: 'create' } : {}, EVENT_TYPES.undeliverable),
    dispatchId: ref.dispatchId,
    projectId: text('projectId'),
    jobId: ref.jobId.startsWith(createdLane('')) ? '' : ref.jobId,
    key: null,
    meta: null,
    job: null,
    status: '',
    reason,
    enqueuedAt: null,
    sentAt: null,
    finishedAt,
    attempts: 0,
    expiresAt: null,
  });
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/**
 * One stream entry (its flat field/value list) as readers show it: the contract's fields (`''`
 * where missing), all fields, and `event` parsed from its JSON (as written when it is not JSON).
 */
export function readEventEntry(flat: readonly string[]) {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i] as string] = flat[i + 1] as string;
  let event: unknown = fields['event'];
  try {
    event = JSON.parse(fields['event'] ?? '');
  } catch {
    // Kept as written.
  }
  const field = (name: string) => fields[name] ?? '';
  return {
    type: field('type'),
    dispatchId: field('dispatchId'),
    projectId: field('projectId'),
    jobId: field('jobId'),
    status: field('status'),
    prLink: field('prLink'),
    event,
    fields,
  };
}
