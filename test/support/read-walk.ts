import type { DispatchRecord } from '../../src/dispatch/record.js';
import type { RunStats } from '../../src/store/run-history.js';
import { firstRead, type FirstRead } from '../../src/dispatch/read-schedule.js';
import { actionForRead } from '../../src/poller/read.js';
import type { ReadActionSettings } from '../../src/poller/read-action.js';

/**
 * A follow-up's status reads walked through actionForRead: each read is taken when it falls due
 * and sees the run active until it ends. The first read is where MARK_SENT schedules it: by
 * default that of a send whose answer did not show the run active, POLL_MIN_INTERVAL after it.
 */

/** When the walked follow-up was sent (epoch ms). */
export const SENT_AT = 1_000_000;

/** The read settings of the service's defaults, with learning off. */
export const READ_DEFAULTS: ReadActionSettings = {
  trackTimeoutMs: 24 * 3_600_000,
  activeGraceMs: 120_000,
  pollMinIntervalMs: 500,
  pollMaxIntervalMs: 60_000,
  ambiguousResend: false,
  connectTimeoutMs: 10_000,
  sendTimeoutMs: 30_000,
};

/** A `sent` record seen active, last read `pollDelayMs` after the one before. */
export function sentRecord(
  pollDelayMs: number,
  extra: Partial<DispatchRecord> = {},
): DispatchRecord {
  return {
    ...{ dispatchId: 'd1', projectId: 'p', jobId: 'j', prompt: 'x', key: undefined },
    ...{ meta: undefined, state: 'sent', enqueuedAt: SENT_AT, sentAt: SENT_AT },
    ...{ sendingAt: SENT_AT, attemptToken: undefined, finishedAt: undefined, attempts: 1 },
    ...{ job: undefined, lastStatus: undefined, seenActive: true, resendPending: false },
    ...{ pollDelayMs, polls: 0, type: undefined, reason: undefined },
    ...extra,
  };
}

/**
 * When each read happens (ms after the send), for a run that ends `runMs` after the send; `runs`:
 * the project's run history; `first`: the first read.
 */
export function readTimes(
  runMs: number,
  s: ReadActionSettings,
  runs?: RunStats,
  first: FirstRead = firstRead(false, s),
): number[] {
  const times: number[] = [];
  let atMs = first.atMs;
  let delayMs = first.waitMs;
  for (;;) {
    times.push(atMs);
    const status = atMs >= runMs ? 'completed' : 'active';
    const seen = { kind: 'job' as const, job: { id: 'j', status, prLink: null } };
    const action = actionForRead(sentRecord(delayMs), seen, SENT_AT + atMs, s, runs);
    if (action.kind !== 'reschedule') return times;
    delayMs = action.delayMs;
    atMs += delayMs;
  }
}
