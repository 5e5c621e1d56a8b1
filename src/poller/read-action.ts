import {
  AgentApiError,
  configRejectionStatus,
  isAgentApiError,
  statusKind,
  type AgentJob,
} from '../agent-api/index.js';
import { sendInFlightMs, type SendTimeouts } from '../dispatch/in-flight.js';
import { EVENT_TYPES, type Ending } from '../dispatch/event.js';
import { STATES, type DispatchRecord } from '../dispatch/record.js';
import type { SeenRun } from '../store/run-history.js';
import { nextDelayMs } from './learned-schedule.js';

/**
 * What a status read can show and lead to, and what it means where the send is not settled yet
 * (its request in flight, a creation with no job) or where the read failed. A settled send's
 * answered read is decided in `actionForRead` (`read.ts`).
 */

/** What one status read saw: the job, or the error the client raised. */
export type Observation = { kind: 'job'; job: AgentJob } | { kind: 'error'; error: unknown };

/** What to do with a tracked dispatch after a status read. */
export type Action =
  /** It ended: publish its event; `run`: how long its run took, known precisely enough. */
  | { kind: 'finish'; ending: Ending; run?: SeenRun }
  /**
   * Read again in `delayMs`, storing `fields` on the record; `overran`: the run went on past where
   * its project's history expected it to end, and tells the history so.
   */
  | {
      kind: 'reschedule';
      delayMs: number;
      fields: Record<string, string | number>;
      overran?: SeenRun;
    }
  /** The read failed (429, 5xx, network): back off this project's reads, keep tracking. */
  | { kind: 'backoff'; delayMs: number }
  /**
   * An unsettled send was never taken up and the operator opted in to resending: queue it again
   * (or, if it is queued for that already, make sure its BullMQ job exists).
   */
  | { kind: 'resend' };

/** The settings that shape decisions (from the config). */
export interface ReadActionSettings extends SendTimeouts {
  readonly trackTimeoutMs: number;
  readonly activeGraceMs: number;
  readonly pollMinIntervalMs: number;
  readonly pollMaxIntervalMs: number;
  readonly ambiguousResend: boolean;
  /** `POLL_LEARN`: shape a sent follow-up's reads by its project's run history. */
  readonly pollLearn?: boolean;
}

/**
 * A failed read of a `sent` or `unsettled` follow-up, `next` the wait its schedule would take:
 * a 404 ends it, past `TRACK_TIMEOUT` (`timeout`, when it passed) it ends timed out, else its
 * project's reads back off.
 */
export function afterFailedRead(
  error: unknown,
  timeout: Ending | undefined,
  next: number,
  s: ReadActionSettings,
): Action {
  if (isAgentApiError(error) && error.code === 'not_found') {
    return { kind: 'finish', ending: { type: EVENT_TYPES.undeliverable, reason: 'not_found' } };
  }
  // A rejected key or a wrong URL says nothing about the job: it ends nothing, not even a
  // timeout (contract, promise 8). The reads back off until the key works again.
  if (timeout && configRejectionStatus(error) === undefined)
    return { kind: 'finish', ending: timeout };
  return {
    kind: 'backoff',
    delayMs: Math.max(next, retryAfter(error) ?? 0, 2 * s.pollMinIntervalMs),
  };
}

/**
 * A dispatch whose send is in flight: its intent is recorded, its outcome not yet. Nothing ends
 * while the request may still be running, counted from the intent (`sendingAt`), never from the
 * enqueue: a follow-up that waited in the queue longer than `TRACK_TIMEOUT` is as fresh as any
 * once its send starts. A job seen active now was taken up after the intent, which settles the
 * send if its worker dies (its rerun marks it `unsettled`). Only one still `sending` long after
 * any request could be in flight, and past `TRACK_TIMEOUT`, is stuck: its worker and its BullMQ
 * job are both gone.
 */
export function whileSending(
  record: DispatchRecord,
  seen: Observation,
  nowMs: number,
  s: ReadActionSettings,
): Action {
  const sinceIntentMs = nowMs - (record.sendingAt ?? record.enqueuedAt);
  const stuck = sinceIntentMs >= Math.max(s.trackTimeoutMs, sendInFlightMs(s));
  const next = nextDelayMs(record, sinceIntentMs, s);
  const job = seen.kind === 'job' ? seen.job : undefined;
  if (stuck) {
    return {
      kind: 'finish',
      ending: { type: EVENT_TYPES.undeliverable, reason: 'stuck_sending', job },
    };
  }
  if (seen.kind === 'error') {
    // A 404 ends nothing here: the worker's own request gets it too, and ends the dispatch.
    if (isAgentApiError(seen.error) && seen.error.code === 'not_found') {
      return { kind: 'reschedule', delayMs: next, fields: {} };
    }
    return {
      kind: 'backoff',
      delayMs: Math.max(next, retryAfter(seen.error) ?? 0, 2 * s.pollMinIntervalMs),
    };
  }
  // Only a '1' is written: seen active is never taken back (reschedule-n.lua).
  const seenActive: Record<string, string> =
    statusKind(seen.job.status) === 'active' ? { seenActive: '1' } : {};
  return {
    kind: 'reschedule',
    delayMs: next,
    fields: {
      job: JSON.stringify(seen.job),
      lastStatus: seen.job.status ?? '',
      polls: record.polls + 1,
      ...seenActive,
      pollDelayMs: next,
    },
  };
}

function retryAfter(error: unknown): number | undefined {
  return isAgentApiError(error) ? error.retryAfterMs : undefined;
}

/** What a creation whose answer has not come shows: no job to read (`not_found`). */
export const NO_JOB: Observation = {
  kind: 'error',
  error: new AgentApiError('no agent job yet', { code: 'not_found', ambiguous: false }),
};

/**
 * A creation with no job known: while its POST may be in flight, it waits (or ends stuck, as a
 * follow-up would); else its answer was lost, which no read can settle: it ends `ambiguous`.
 */
export function withoutJob(record: DispatchRecord, nowMs: number, s: ReadActionSettings): Action {
  if (record.state === STATES.sending) return whileSending(record, NO_JOB, nowMs, s);
  return { kind: 'finish', ending: { type: EVENT_TYPES.undeliverable, reason: 'ambiguous' } };
}
