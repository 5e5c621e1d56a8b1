import type { IncomingHttpHeaders } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_RESPONSE_BYTES } from '../../src/agent-api/index.js';
import { TEST_API_KEY } from '../support/simulator.js';
import { failure, httpServer, testClient, type TestServer } from './servers.js';

/**
 * The client against tiny HTTP servers that answer what the simulator never does: 403, other 4xx,
 * every rate-limit header form, an HTML 503, odd 2xx bodies, a server echoing our headers.
 */

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly headers?: Record<string, string>;
}

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A server answering every request with `answer`, recording what it received. */
async function answering(
  answer: Answer | ((seen: Seen) => Answer),
): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = await httpServer((req, res, body) => {
    const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
    seen.push(request);
    const { status, body: text, headers } = typeof answer === 'function' ? answer(request) : answer;
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(text);
  });
  return { url: server.url, seen };
}

const JOB = JSON.stringify({ id: 'j', status: 'active', prLink: null });

async function send(url: string) {
  const client = testClient(url);
  try {
    return await failure(client.sendMessage('p', 'j', 'hello'));
  } finally {
    await client.close();
  }
}

describe('request shape', () => {
  it('POSTs {"prompt"} as JSON with the bearer key, under the base URL path', async () => {
    const { url, seen } = await answering({ status: 200, body: JOB });
    const client = testClient(`${url}/api/`);
    await client.sendMessage('p 1', 'j/2', 'do "this"');
    await client.getJob('p 1', 'j/2');
    await client.close();
    expect(seen.map((s) => [s.method, s.url])).toEqual([
      ['POST', '/api/v2/agent/p%201/job/j%2F2/message'],
      ['GET', '/api/v2/agent/p%201/job/j%2F2'],
    ]);
    expect(JSON.parse(seen[0]!.body)).toEqual({ prompt: 'do "this"' });
    expect(seen[0]!.headers).toMatchObject({
      authorization: `Bearer ${TEST_API_KEY}`,
      'content-type': 'application/json',
    });
    expect(seen[1]!.headers.authorization).toBe(`Bearer ${TEST_API_KEY}`);
    expect(seen[1]!.body).toBe('');
  });

  it('accepts any 2xx with a job body', async () => {
    const { url } = await answering({ status: 201, body: JOB });
    const client = testClient(url);
    await expect(client.getJob('p', 'j')).resolves.toMatchObject({ id: 'j', status: 'active' });
    await client.close();
  });
});

describe('error statuses', () => {
  it.each([
    [401, 'unauthorized'],
    [403, 'unauthorized'],
    [404, 'not_found'],
    [400, 'bad_request'],
    [409, 'bad_request'],
    [418, 'bad_request'],
    [422, 'bad_request'],
    [429, 'rate_limited'],
    [500, 'server'],
    [504, 'server'],
  ])('maps %i to %s', async (status, code) => {
    const { url } = await answering({ status, body: JSON.stringify({ error: `nope ${status}` }) });
    const err = await send(url);
    expect(err).toMatchObject({
      code,
      httpStatus: status,
      ambiguous: false,
      serverMessage: `nope ${status}`,
    });
  });

  it('maps an HTML 503 to server with a folded, truncated message', async () => {
    const page = `<html>\n<body>\n<h1>503 Service Unavailable</h1>\n${'x'.repeat(500)}</body></html>`;
    const { url } = await answering({
      status: 503,
      body: page,
      headers: { 'content-type': 'text/html' },
    });
    const err = await send(url);
    expect(err).toMatchObject({ code: 'server', httpStatus: 503, ambiguous: false });
    expect(err.serverMessage).toMatch(/^<html> <body> <h1>503 Service Unavailable<\/h1>/);
    expect(err.serverMessage).toHaveLength(200);
  });

  it('never lets a server echo the key into an error', async () => {
    const { url } = await answering((seen) => ({
      status: 400,
      body: JSON.stringify({ error: `bad header ${seen.headers.authorization}` }),
    }));
    const err = await send(url);
    expect(err.serverMessage).toBe('bad header Bearer [redacted]');
  });
});

describe('a server echoing the key into a 2xx body', () => {
  /** Every text an error carries: message, server message and each cause's message, as JSON. */
  const texts = (err: unknown): string => {
    const parts: unknown[] = [];
    for (let e: unknown = err; e instanceof Error; e = e.cause) parts.push(e.message, { ...e });
    return JSON.stringify(parts);
  };
  /** The key with its first character JSON-escaped, as a server may write it. */
  const escaped = `\\u${TEST_API_KEY.charCodeAt(0).toString(16).padStart(4, '0')}${TEST_API_KEY.slice(1)}`;

  it('keeps the key out of the job, in contract fields as in others', async () => {
    const { url } = await answering((seen) => ({
      status: 200,
      body: `{"id":"j","status":"active","model":"${seen.headers.authorization}","prLink":"${escaped}","debug":{"auth":"${seen.headers.authorization}"}}`,
    }));
    const client = testClient(url);
    try {
      const job = await client.sendMessage('p', 'j', 'hello');
      expect(job).toEqual({
        id: 'j',
        status: 'active',
        model: 'Bearer [redacted]',
        prLink: '[redacted]',
      });
    } finally {
      await client.close();
    }
  });

  it.each([
    ['the bare key', (auth: string) => auth.replace(/^Bearer /, '')],
    ['not JSON', (auth: string) => `echo: ${auth}`],
    ['JSON of the wrong shape', (auth: string) => `{"id": 7, "note": "${auth}"}`],
    ['truncated JSON', (auth: string) => `{"id": "j", "model": "${auth}`],
  ])('keeps the key out of the bad_response error for %s', async (_what, body) => {
    const { url } = await answering((seen) => ({
      status: 200,
      body: body(seen.headers.authorization ?? ''),
    }));
    const err = await send(url);
    expect(err).toMatchObject({ code: 'bad_response' });
    // JSON.parse quotes the first characters of a body it cannot read: a key prefix is a leak too.
    expect(texts(err)).not.toContain(TEST_API_KEY.slice(0, 8));
  });
});

describe('429 wait hints', () => {
  it.each([
    ['Retry-After in seconds', { 'retry-after': '7' }, 7_000],
    ['Retry-After with a fraction', { 'retry-after': '1.5' }, 1_500],
    ['RateLimit-Reset in seconds', { 'ratelimit-reset': '12' }, 12_000],
    ['the RateLimit header t parameter', { ratelimit: '"default";r=0;t=9' }, 9_000],
    ['no header', {}, undefined],
  ])('reads %s', async (_what, headers: Record<string, string>, expected) => {
    const { url } = await answering({
      status: 429,
      body: 'slow down',
      headers: { 'content-type': 'text/plain', ...headers },
    });
    const err = await send(url);
    expect(err).toMatchObject({
      code: 'rate_limited',
      retryAfterMs: expected,
      serverMessage: 'slow down',
    });
  });

  it('reads Retry-After as an HTTP date', async () => {
    const at = new Date(Date.now() + 60_000).toUTCString();
    const { url } = await answering({
      status: 429,
      body: '{"error":"later"}',
      headers: { 'retry-after': at },
    });
    const err = await send(url);
    expect(err.retryAfterMs).toBeGreaterThan(55_000);
    expect(err.retryAfterMs).toBeLessThanOrEqual(60_000);
  });
});

describe('2xx bodies that are not an agent job', () => {
  it.each([
    ['not JSON', 'OK'],
    ['an array', '[]'],
    ['a string', '"done"'],
    ['null', 'null'],
    ['a job with a wrong field type', JSON.stringify({ id: 42, status: 'active' })],
  ])('maps %s to bad_response (accepted, not ambiguous)', async (_what, body) => {
    const { url } = await answering({ status: 200, body });
    const err = await send(url);
    expect(err).toMatchObject({ code: 'bad_response', httpStatus: 200, ambiguous: false });
    expect(err.message).toContain('the message was accepted');
  });

  it('stops reading a body larger than the limit', async () => {
    const { url } = await answering({
      status: 200,
      body: `"${'x'.repeat(MAX_RESPONSE_BYTES + 10)}"`,
    });
    const err = await send(url);
    expect(err).toMatchObject({ code: 'bad_response', httpStatus: 200, ambiguous: false });
    expect(err.cause).toMatchObject({ code: 'response_too_large' });
  });
});
