import { describe, expect, it } from 'vitest';
import type { DispatchRecord } from '../../src/dispatch/record.js';
import { actionForRead, type ReadActionSettings } from '../../src/poller/read-action.js';

/**
 * The read schedule of one follow-up, walked through actionForRead: each read is taken when it
 * falls due and sees the run active until it ends. The first read comes POLL_MIN_INTERVAL after
 * the send (MARK_SENT schedules it).
 */

const SENT_AT = 1_000_000;
const DEFAULTS: ReadActionSettings = {
  trackTimeoutMs: 24 * 3_600_000,
  activeGraceMs: 120_000,
  pollMinIntervalMs: 500,
  pollMaxIntervalMs: 60_000,
  ambiguousResend: false,
  connectTimeoutMs: 10_000,
  sendTimeoutMs: 30_000,
};

function record(pollDelayMs: number): DispatchRecord {
  return {
    ...{ dispatchId: 'd1', projectId: 'p', jobId: 'j', prompt: 'x', key: undefined },
    ...{ meta: undefined, state: 'sent', enqueuedAt: SENT_AT, sentAt: SENT_AT },
    ...{ sendingAt: SENT_AT, attemptToken: undefined, finishedAt: undefined, attempts: 1 },
    ...{ job: undefined, lastStatus: undefined, seenActive: true, resendPending: false },
    ...{ pollDelayMs, polls: 0, type: undefined, reason: undefined },
  };
}

/** When each read happens (ms after the send), for a run that ends `runMs` after the send. */
function readTimes(runMs: number, s: ReadActionSettings): number[] {
  const times: number[] = [];
  let atMs = s.pollMinIntervalMs;
  let delayMs = s.pollMinIntervalMs;
  for (;;) {
    times.push(atMs);
    const status = atMs >= runMs ? 'completed' : 'active';
    const seen = { kind: 'job' as const, job: { id: 'j', status, prLink: null } };
    const action = actionForRead(record(delayMs), seen, SENT_AT + atMs, s);
    if (action.kind !== 'reschedule') return times;
    delayMs = action.delayMs;
    atMs += delayMs;
  }
}

describe('the read schedule', () => {
  it('costs at most 15 GETs for a 5-minute run with the default settings', () => {
    expect(readTimes(5 * 60_000, DEFAULTS).length).toBeLessThanOrEqual(15);
  });

  it('reads a run that ends in its first 20 POLL_MIN_INTERVALs within 4 of them', () => {
    for (const min of [250, 500, 1_000]) {
      const s = { ...DEFAULTS, pollMinIntervalMs: min };
      for (let runMs = min; runMs <= 20 * min; runMs += min / 4) {
        const times = readTimes(runMs, s);
        expect(times.at(-1)! - runMs).toBeLessThanOrEqual(4 * min);
      }
    }
  });

  it('still reads densely in the first seconds, and waits at most POLL_MAX_INTERVAL later', () => {
    const times = readTimes(10 * 60_000, DEFAULTS);
    expect(times.slice(0, 4)).toEqual([500, 1_250, 2_375, 4_063]);
    const waits = times.slice(1).map((t, i) => t - (times[i] as number));
    expect(Math.max(...waits)).toBe(DEFAULTS.pollMaxIntervalMs);
  });
});
