import { describe, expect, it } from 'vitest';
import { AgentApiError, type AgentErrorCode } from '../../src/agent-api/index.js';
import { errorFromStatus } from '../../src/agent-api/errors.js';
import { budgetMarginMs } from '../../src/dispatch/budget.js';
import { rateLimitParkMs } from '../../src/consumer/after-failure.js';
import { classifySendFailure } from '../../src/consumer/send-failure.js';

const error = (code: AgentErrorCode, ambiguous = false, retryAfterMs?: number) =>
  new AgentApiError(code, { code, ambiguous, retryAfterMs });

describe('classifySendFailure', () => {
  it.each([
    ['bad_request', { kind: 'permanent', reason: 'bad_request' }],
    ['not_found', { kind: 'permanent', reason: 'not_found' }],
    ['server', { kind: 'transient', reason: 'server', refund: false }],
    ['network', { kind: 'transient', reason: 'network', refund: true }],
    ['timeout', { kind: 'transient', reason: 'timeout', refund: true }],
    ['bad_response', { kind: 'delivered', reason: 'bad_response' }],
  ] as const)('maps %s that surely did not reach the API', (code, expected) => {
    expect(classifySendFailure(error(code))).toEqual(expected);
  });

  it('never resends what may have been delivered', () => {
    expect(classifySendFailure(error('timeout', true))).toEqual({
      kind: 'ambiguous',
      reason: 'timeout',
    });
    expect(classifySendFailure(error('network', true))).toEqual({
      kind: 'ambiguous',
      reason: 'network',
    });
    expect(classifySendFailure(new Error('a bug'))).toEqual({
      kind: 'ambiguous',
      reason: 'unexpected_error',
    });
  });

  it.each([401, 403, 301, 302, 307, 308])(
    'pauses every send, and ends nothing, on a %i (a rejected key or a wrong AGENT_API_URL)',
    (status) => {
      const err = errorFromStatus('send', status, {}, '', (text) => text);
      expect(classifySendFailure(err)).toEqual({ kind: 'auth_paused', httpStatus: status });
    },
  );

  it('keeps the wait a 429 named', () => {
    expect(classifySendFailure(error('rate_limited', false, 12_000))).toEqual({
      kind: 'rate_limited',
      retryAfterMs: 12_000,
    });
  });
});

describe('rateLimitParkMs', () => {
  const rate = { max: 100, windowMs: 3_600_000 };
  it('lets the API decide when it said how long', () => {
    expect(rateLimitParkMs(5_000, rate, 3)).toBe(5_000);
  });
  it('without a wait, doubles one slot per 429 in a row up to the window', () => {
    expect(rateLimitParkMs(undefined, rate, 0)).toBe(36_000);
    expect(rateLimitParkMs(undefined, rate, 1)).toBe(72_000);
    expect(rateLimitParkMs(undefined, rate, 30)).toBe(3_600_000);
  });
});

describe('budgetMarginMs', () => {
  it('is 2.5 % of the window, between 100 ms and 1 s', () => {
    expect(budgetMarginMs(2_000)).toBe(100);
    expect(budgetMarginMs(10_000)).toBe(250);
    expect(budgetMarginMs(3_600_000)).toBe(1_000);
  });
});
