import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { codeOfStatus, retryAfterMsOf, serverMessageOf } from '../../src/agent-api/errors.js';
import { errorFromTransport } from '../../src/agent-api/transport-errors.js';
import { AGENT_ERROR_CODES, AgentApiError, describeError } from '../../src/agent-api/index.js';

/** Unit checks of the mapping tables; the real exchanges are in the client tests. */

const keep = (text: string) => text;

describe('codeOfStatus', () => {
  it('maps every status class to a known code', () => {
    const table = [400, 401, 403, 404, 405, 429, 451, 500, 502, 599].map((s) => [
      s,
      codeOfStatus(s),
    ]);
    expect(table).toEqual([
      [400, 'bad_request'],
      [401, 'unauthorized'],
      [403, 'unauthorized'],
      [404, 'not_found'],
      [405, 'bad_request'],
      [429, 'rate_limited'],
      [451, 'bad_request'],
      [500, 'server'],
      [502, 'server'],
      [599, 'server'],
    ]);
    for (const [, code] of table) expect(AGENT_ERROR_CODES).toContain(code);
  });
});

describe('retryAfterMsOf', () => {
  const now = Date.parse('2025-06-01T12:00:00Z');
  it.each([
    [{ 'retry-after': '0' }, 0],
    [{ 'retry-after': '2.25' }, 2_250],
    [{ 'retry-after': 'Sun, 01 Jun 2025 12:00:30 GMT' }, 30_000],
    [{ 'retry-after': 'Sun, 01 Jun 2025 11:00:00 GMT' }, 0],
    [{ 'retry-after': 'soon', 'ratelimit-reset': '4' }, 4_000],
    [{ ratelimit: 'limit=100, remaining=0, reset=5' }, undefined],
    [{ ratelimit: '"hour";r=0;t=60' }, 60_000],
    [{ 'retry-after': ['3', '9'] }, 3_000],
    [{}, undefined],
  ])('reads %j as %s ms', (headers, expected) => {
    expect(retryAfterMsOf(headers as IncomingHttpHeaders, now)).toBe(expected);
  });
});

describe('serverMessageOf', () => {
  it('prefers the JSON error field and folds whitespace', () => {
    expect(serverMessageOf('{"error":"too\\n many"}', keep)).toBe('too many');
    expect(serverMessageOf('{"message":"x"}', keep)).toBe('{"message":"x"}');
    expect(serverMessageOf('  ', keep)).toBeUndefined();
  });

  it('truncates to 200 characters and scrubs before truncating', () => {
    const long = serverMessageOf('secret '.repeat(300), (t) => t.replaceAll('secret', 's'));
    expect(long).toHaveLength(200);
    expect(long).not.toContain('secret');
  });
});

describe('errorFromTransport and describeError', () => {
  it('sets ambiguous from whether the request was written', () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(describeError(errorFromTransport('send', reset, true, false))).toEqual({
      code: 'network',
      httpStatus: undefined,
      ambiguous: true,
      retryAfterMs: undefined,
    });
    expect(errorFromTransport('send', reset, false, false).ambiguous).toBe(false);
    const timeout = Object.assign(new Error('x'), { code: 'UND_ERR_BODY_TIMEOUT' });
    expect(errorFromTransport('get', timeout, true, false).code).toBe('timeout');
    expect(errorFromTransport('get', 'weird', false, true)).toMatchObject({
      code: 'timeout',
      cause: 'weird',
    });
  });

  it('describes foreign errors as unknown and ambiguous', () => {
    expect(describeError(new Error('boom'))).toMatchObject({ code: 'unknown', ambiguous: true });
    expect(new AgentApiError('m', { code: 'server', ambiguous: false })).toBeInstanceOf(Error);
  });
});
