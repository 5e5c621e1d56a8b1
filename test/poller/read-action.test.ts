import { describe, expect, it } from 'vitest';
import { AgentApiError } from '../../src/agent-api/index.js';
import type { DispatchRecord } from '../../src/dispatch/record.js';
import { actionForRead } from '../../src/poller/read.js';
import type { ReadActionSettings } from '../../src/poller/read-action.js';

const SETTINGS: ReadActionSettings = {
  trackTimeoutMs: 60_000,
  activeGraceMs: 10_000,
  pollMinIntervalMs: 1_000,
  pollMaxIntervalMs: 8_000,
  ambiguousResend: false,
  connectTimeoutMs: 10_000,
  sendTimeoutMs: 30_000,
};
const SENT_AT = 1_000_000;

function record(fields: Partial<DispatchRecord> = {}): DispatchRecord {
  return {
    dispatchId: 'd1',
    projectId: 'p',
    jobId: 'j',
    prompt: 'x',
    key: undefined,
    meta: undefined,
    state: 'sent',
    enqueuedAt: SENT_AT - 10,
    sentAt: SENT_AT,
    sendingAt: SENT_AT,
    attemptToken: undefined,
    finishedAt: undefined,
    attempts: 1,
    job: undefined,
    lastStatus: undefined,
    seenActive: false,
    resendPending: false,
    pollDelayMs: 1_000,
    polls: 0,
    type: undefined,
    reason: undefined,
    ...fields,
  };
}
const job = (status: string, prLink: string | null = null) => ({
  kind: 'job' as const,
  job: { id: 'j', status, prLink },
});
const failure = (
  code: 'not_found' | 'rate_limited' | 'server' | 'unauthorized' | 'bad_request',
  retryAfterMs?: number,
  httpStatus?: number,
) => ({
  kind: 'error' as const,
  error: new AgentApiError('get failed', { code, ambiguous: false, retryAfterMs, httpStatus }),
});

describe('actionForRead', () => {
  it('ends with the job status once the job was seen active after the send', () => {
    const action = actionForRead(
      record({ seenActive: true }),
      job('completed', 'https://x/pull/1'),
      SENT_AT + 500,
      SETTINGS,
    );
    expect(action).toMatchObject({ kind: 'finish', ending: { type: 'followup.completed' } });
    expect(
      actionForRead(record({ seenActive: true }), job('failed'), SENT_AT + 500, SETTINGS),
    ).toMatchObject({ ending: { type: 'followup.failed' } });
    expect(
      actionForRead(record({ seenActive: true }), job('archived'), SENT_AT + 500, SETTINGS),
    ).toMatchObject({ ending: { type: 'followup.archived' } });
  });

  it('does not trust a terminal status never preceded by active until the grace period passed', () => {
    expect(actionForRead(record(), job('completed'), SENT_AT + 9_999, SETTINGS)).toMatchObject({
      kind: 'reschedule',
      delayMs: 1_000,
    });
    expect(actionForRead(record(), job('completed'), SENT_AT + 10_000, SETTINGS)).toMatchObject({
      kind: 'finish',
      ending: { type: 'followup.completed' },
    });
  });

  it('settles an unsettled send that never showed active as ambiguous, or resends when allowed', () => {
    const unsettled = record({ state: 'unsettled' });
    expect(actionForRead(unsettled, job('completed'), SENT_AT + 10_000, SETTINGS)).toMatchObject({
      kind: 'finish',
      ending: { type: 'followup.undeliverable', reason: 'ambiguous' },
    });
    expect(
      actionForRead(unsettled, job('completed'), SENT_AT + 10_000, {
        ...SETTINGS,
        ambiguousResend: true,
      }),
    ).toEqual({ kind: 'resend' });
    expect(
      actionForRead(
        { ...unsettled, seenActive: true },
        job('completed'),
        SENT_AT + 10_000,
        SETTINGS,
      ),
    ).toMatchObject({ ending: { type: 'followup.completed' } });
  });

  it('marks active, backs the interval off each time up to the cap', () => {
    const first = actionForRead(record(), job('active'), SENT_AT + 100, SETTINGS);
    expect(first).toMatchObject({
      kind: 'reschedule',
      delayMs: 1_500,
      fields: { seenActive: '1', state: 'sent', pollDelayMs: 1_500 },
    });
    // Past the first 20 POLL_MIN_INTERVALs after the send, up to POLL_MAX_INTERVAL.
    expect(
      actionForRead(record({ pollDelayMs: 7_000 }), job('active'), SENT_AT + 20_000, SETTINGS),
    ).toMatchObject({ delayMs: 8_000 });
  });

  it('keeps tracking an unknown status and never finishes on it', () => {
    expect(actionForRead(record(), job('queued_v3'), SENT_AT + 100, SETTINGS)).toMatchObject({
      kind: 'reschedule',
      fields: { lastStatus: 'queued_v3' },
    });
  });

  it('only watches a dispatch whose send is still in flight', () => {
    const sending = record({ state: 'sending' });
    const stale = actionForRead(sending, job('completed'), SENT_AT + 50_000, SETTINGS);
    expect(stale).toMatchObject({ kind: 'reschedule', fields: { lastStatus: 'completed' } });
    // Never a '0': a '1' stored meanwhile (MARK_SENT) is not taken back.
    expect(stale).not.toHaveProperty('fields.seenActive');
    expect(actionForRead(sending, job('active'), SENT_AT + 100, SETTINGS)).toMatchObject({
      kind: 'reschedule',
      fields: { seenActive: '1' },
    });
    expect(actionForRead(sending, job('active'), SENT_AT + 100, SETTINGS)).not.toHaveProperty(
      'fields.state',
    );
  });

  it('counts a send in flight from its intent, not from when it was enqueued', () => {
    // Waited in the queue twice TRACK_TIMEOUT, then its send started a second ago.
    const sending = record({
      state: 'sending',
      enqueuedAt: SENT_AT - 2 * SETTINGS.trackTimeoutMs,
      sentAt: undefined,
      sendingAt: SENT_AT,
    });
    expect(actionForRead(sending, job('completed'), SENT_AT + 1_000, SETTINGS)).toMatchObject({
      kind: 'reschedule',
    });
    expect(actionForRead(sending, failure('server'), SENT_AT + 1_000, SETTINGS)).toMatchObject({
      kind: 'backoff',
    });
    // A 404 ends it only through the worker, whose own request gets the 404 too.
    expect(actionForRead(sending, failure('not_found'), SENT_AT + 1_000, SETTINGS)).toMatchObject({
      kind: 'reschedule',
    });
  });

  it('ends nothing still sending before the request and its recording can have ended', () => {
    // TRACK_TIMEOUT shorter than one request may take: connect + headers + body timeouts.
    const quick = { ...SETTINGS, trackTimeoutMs: 1_000 };
    const sending = record({ state: 'sending', sentAt: undefined, sendingAt: SENT_AT });
    const inFlightMs = quick.connectTimeoutMs + 2 * quick.sendTimeoutMs;
    expect(actionForRead(sending, job('active'), SENT_AT + inFlightMs, quick)).toMatchObject({
      kind: 'reschedule',
    });
    // Long after any request could be in flight, and past TRACK_TIMEOUT: it is stuck.
    expect(actionForRead(sending, job('active'), SENT_AT + 10 * inFlightMs, quick)).toMatchObject({
      kind: 'finish',
      ending: { type: 'followup.undeliverable', reason: 'stuck_sending' },
    });
    expect(
      actionForRead(
        sending,
        job('active'),
        SENT_AT + SETTINGS.trackTimeoutMs + 10 * inFlightMs,
        SETTINGS,
      ),
    ).toMatchObject({ kind: 'finish', ending: { reason: 'stuck_sending' } });
  });

  it('re-adds the job of a queued resend, and leaves any other queued dispatch to its worker', () => {
    expect(
      actionForRead(
        record({ state: 'queued', resendPending: true }),
        job('completed'),
        SENT_AT,
        SETTINGS,
      ),
    ).toEqual({ kind: 'resend' });
    expect(
      actionForRead(record({ state: 'queued' }), job('completed'), SENT_AT, SETTINGS),
    ).toMatchObject({
      kind: 'reschedule',
      fields: {},
    });
  });

  it('ends a 404 as undeliverable, and backs off on 429 and 5xx without ending', () => {
    expect(actionForRead(record(), failure('not_found'), SENT_AT + 100, SETTINGS)).toMatchObject({
      ending: { type: 'followup.undeliverable', reason: 'not_found' },
    });
    expect(
      actionForRead(record(), failure('rate_limited', 30_000), SENT_AT + 100, SETTINGS),
    ).toEqual({
      kind: 'backoff',
      delayMs: 30_000,
    });
    expect(actionForRead(record(), failure('server'), SENT_AT + 100, SETTINGS)).toEqual({
      kind: 'backoff',
      delayMs: 2_000,
    });
  });

  it('times out a follow-up still not terminal after TRACK_TIMEOUT', () => {
    expect(actionForRead(record(), job('active'), SENT_AT + 60_000, SETTINGS)).toMatchObject({
      ending: { type: 'followup.timed_out', reason: 'track_timeout' },
    });
    expect(actionForRead(record(), failure('server'), SENT_AT + 60_000, SETTINGS)).toMatchObject({
      ending: { type: 'followup.timed_out' },
    });
  });

  it('ends and times out nothing on a rejected key (401/403) or a redirect (3xx): it backs off', () => {
    for (const [code, status] of [
      ['unauthorized', 401],
      ['unauthorized', 403],
      ['bad_request', 302],
    ] as const) {
      for (const state of ['sent', 'unsettled', 'sending'] as const) {
        expect(
          actionForRead(
            record({ state }),
            failure(code, undefined, status),
            SENT_AT + 60_000,
            SETTINGS,
          ),
        ).toEqual({ kind: 'backoff', delayMs: 2_000 });
      }
    }
  });
});
