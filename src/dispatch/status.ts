import type { AgentJob } from '../agent-api/index.js';
import { agentJobOf } from './creation.js';
import type { EventType } from './event.js';
import type { DispatchRecord, DispatchState } from './record.js';

/** A dispatch's state as `status` and `GET /v1/followups/:id` show it. Times are ISO strings. */
export interface DispatchStatus {
  dispatchId: string;
  projectId: string;
  /** The agent job; `''` while a creation's, or a chained follow-up's, is not known yet. */
  jobId: string;
  /** `create`: it creates an agent job; `followup`: it sends a prompt to one. */
  kind: 'create' | 'followup';
  /** The creation a chained follow-up waits for, or null. */
  after: string | null;
  key: string | null;
  meta: Record<string, unknown> | null;
  state: DispatchState;
  /** The event type it ended with, once `state` is `done`. */
  type: EventType | null;
  reason: string | null;
  /** The agent job's last status seen. */
  status: string | null;
  prLink: string | null;
  attempts: number;
  enqueuedAt: string;
  sentAt: string | null;
  finishedAt: string | null;
  /** Its deadline (`ttl` or `expiresAt` when sent), or null: none. */
  expiresAt: string | null;
  job: AgentJob | null;
  /** The dead letter it redrives (a redrive made it), or null. */
  redriveOf: string | null;
  /** The follow-up that redrives it (it was a dead letter), or null. */
  redrivenTo: string | null;
}

/** The public view of a record: everything but the prompt. */
export function describeDispatch(record: DispatchRecord): DispatchStatus {
  const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
  return {
    dispatchId: record.dispatchId,
    projectId: record.projectId,
    jobId: agentJobOf(record),
    kind: record.kind ?? 'followup',
    after: record.after ?? null,
    key: record.key ?? null,
    meta: record.meta ?? null,
    state: record.state,
    type: record.type ?? null,
    reason: record.reason ?? null,
    status: record.job?.status ?? record.lastStatus ?? null,
    prLink: typeof record.job?.prLink === 'string' ? record.job.prLink : null,
    attempts: record.attempts,
    enqueuedAt: new Date(record.enqueuedAt).toISOString(),
    sentAt: iso(record.sentAt),
    finishedAt: iso(record.finishedAt),
    expiresAt: iso(record.expiresAt),
    job: record.job ?? null,
    redriveOf: record.redriveOf ?? null,
    redrivenTo: record.redrivenTo ?? null,
  };
}
