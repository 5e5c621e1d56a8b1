import {
  AgentApiError,
  configRejectionStatus,
  isAgentApiError,
  isTerminalStatus,
  statusKind,
  type AgentJob,
} from '../agent-api/index.js';
import { sendInFlightMs, type SendTimeouts } from '../dispatch/in-flight.js';
import { EVENT_TYPES, eventTypeOf, type Ending } from '../dispatch/event.js';
import { STATES, type DispatchRecord } from '../dispatch/record.js';
import { observedRunMs, type ObservedRun, type RunStats } from '../store/run-history.js';
import { growingDelayMs } from '../dispatch/read-schedule.js';
import { planReads, plannedDelayMs } from './learned-schedule.js';

/** What one status read saw: the job, or the error the client raised. */
export type Observation = { kind: 'job'; job: AgentJob } | { kind: 'error'; error: unknown };

/** What to do with a tracked dispatch after a status read. */
export type Action =
  /** It ended: publish its event; `run`: how long its run took, known precisely enough. */
  | { kind: 'finish'; ending: Ending; run?: ObservedRun }
  /** Read again in `delayMs`, storing `fields` on the record. */
  | { kind: 'reschedule'; delayMs: number; fields: Record<string, string | number> }
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
 * Decides what a status read means for a dispatch.
 *
 * The stale terminal status: a send is processed asynchronously, so right after it the job may
 * still show the previous run's `completed`. A terminal status therefore counts for this follow-up
 * only once the job was seen `active` after the send, or once `activeGraceMs` passed without ever
 * seeing it active (a run too quick to be caught between two reads). For a send whose delivery is
 * unknown (`unsettled`), "never seen active" means it was most likely never taken: it ends
 * undeliverable (`ambiguous`), or is resent when the operator chose so.
 *
 * `runs`: the project's run history, which shapes the reads of a `sent` follow-up (with
 * `POLL_LEARN`); a run seen ended precisely enough carries its length in the `finish`.
 */
export function actionForRead(
  record: DispatchRecord,
  seen: Observation,
  nowMs: number,
  s: ReadActionSettings,
  runs?: RunStats,
): Action {
  if (record.state === STATES.sending) return whileSending(record, seen, nowMs, s);
  const sinceSendMs = nowMs - (record.sentAt ?? record.enqueuedAt);
  const timedOut = sinceSendMs >= s.trackTimeoutMs;
  const timeout: Ending = { type: EVENT_TYPES.timedOut, reason: 'track_timeout' };
  const next = nextDelayMs(record, sinceSendMs, s, s.pollLearn ? runs : undefined);

  if (record.state === STATES.queued) {
    // Only a resend is tracked while queued: make sure its BullMQ job exists, then look later.
    return record.resendPending
      ? { kind: 'resend' }
      : { kind: 'reschedule', delayMs: next, fields: {} };
  }
  if (seen.kind === 'error') {
    if (isAgentApiError(seen.error) && seen.error.code === 'not_found') {
      return { kind: 'finish', ending: { type: EVENT_TYPES.undeliverable, reason: 'not_found' } };
    }
    // A rejected key or a wrong URL says nothing about the job: it ends nothing, not even a
    // timeout (contract, promise 8). The reads back off until the key works again.
    if (timedOut && configRejectionStatus(seen.error) === undefined)
      return { kind: 'finish', ending: timeout };
    return {
      kind: 'backoff',
      delayMs: Math.max(next, retryAfter(seen.error) ?? 0, 2 * s.pollMinIntervalMs),
    };
  }

  const { job } = seen;
  const status = job.status;
  const kind = statusKind(status);
  const fields = { job: JSON.stringify(job), lastStatus: status ?? '', polls: record.polls + 1 };
  if (isTerminalStatus(status)) {
    const ended: Action = { kind: 'finish', ending: { type: eventTypeOf(status), job } };
    if (record.seenActive) {
      const run = s.pollLearn ? observedRunMs(record, nowMs, s.pollMinIntervalMs) : undefined;
      return run === undefined ? ended : { ...ended, run };
    }
    if (sinceSendMs >= s.activeGraceMs) {
      if (record.state === STATES.sent) return ended;
      if (s.ambiguousResend) return { kind: 'resend' };
      return {
        kind: 'finish',
        ending: { type: EVENT_TYPES.undeliverable, reason: 'ambiguous', job },
      };
    }
    // Within the grace period: read again soon, to catch the run while it is active.
    return {
      kind: 'reschedule',
      delayMs: s.pollMinIntervalMs,
      fields: { ...fields, pollDelayMs: s.pollMinIntervalMs },
    };
  }
  if (timedOut) return { kind: 'finish', ending: { ...timeout, job } };
  if (kind === 'active') {
    return {
      kind: 'reschedule',
      delayMs: next,
      fields: {
        ...fields,
        ...{ seenActive: '1', activeAt: nowMs, state: STATES.sent, pollDelayMs: next },
      },
    };
  }
  // An unknown status is tolerated: keep reading, as for an active run.
  return { kind: 'reschedule', delayMs: next, fields: { ...fields, pollDelayMs: next } };
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
function whileSending(
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

/**
 * The next wait between reads, `sinceSendMs` after the send: the learned schedule for a `sent`
 * follow-up whose project has a history that shapes one (`learned-schedule.ts`), else the
 * growing one. An `unsettled` send keeps the growing schedule: its early reads must catch the run
 * active, or it ends undeliverable.
 */
function nextDelayMs(
  record: DispatchRecord,
  sinceSendMs: number,
  s: ReadActionSettings,
  runs?: RunStats,
): number {
  const lastMs = record.pollDelayMs ?? s.pollMinIntervalMs;
  const plan = record.state === STATES.sent ? planReads(runs, s) : undefined;
  return plan
    ? plannedDelayMs(plan, sinceSendMs, lastMs, s)
    : growingDelayMs(lastMs, sinceSendMs, s);
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
  if (record.state === STATES.sending) return actionForRead(record, NO_JOB, nowMs, s);
  return { kind: 'finish', ending: { type: EVENT_TYPES.undeliverable, reason: 'ambiguous' } };
}
