import { request, type ClientRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/namespace.js';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

const TOKEN = 'body-limits-intake-token';
/** Small limits, so a test body is a few dozen KiB. */
const BODY_MAX = 64 * 1024;

afterAll(() => expectNoLeakedHandles());

describe('request bodies the intake reads', () => {
  const served = useTestServer(
    'http-body-limits',
    { INTAKE_TOKEN: TOKEN, HTTP_BODY_MAX: '64KiB', HTTP_BODY_INFLIGHT_MAX: '96KiB' },
    () => ({ withProducer: true }),
  );
  const post = (body: string | Buffer, headers: Record<string, string> = {}) =>
    fetch(`${served.app.url}/v1/followups`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        ...headers,
      },
      body,
    });
  const followUp = { projectId: 'p', jobId: 'j', prompt: 'hello' };

  it('answers 413 naming HTTP_BODY_MAX for a body over it', async () => {
    const res = await post(JSON.stringify({ ...followUp, meta: { pad: 'x'.repeat(BODY_MAX) } }));
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: expect.stringContaining('HTTP_BODY_MAX') });
  });

  it('counts the inflated size of a gzip body against the limit', async () => {
    const big = gzipSync(JSON.stringify({ ...followUp, meta: { pad: 'x'.repeat(BODY_MAX) } }));
    expect(big.length).toBeLessThan(BODY_MAX);
    expect((await post(big, { 'content-encoding': 'gzip' })).status).toBe(413);
    const small = gzipSync(JSON.stringify(followUp));
    expect((await post(small, { 'content-encoding': 'gzip' })).status).toBe(202);
  });

  it('answers 400, not 500, for a body that is not valid gzip', async () => {
    const res = await post(Buffer.from('certainly not gzip'), { 'content-encoding': 'gzip' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: expect.stringMatching(/gzip/) });
  });

  it('answers 415 for a charset other than UTF-8', async () => {
    for (const charset of ['latin1', 'utf-16', 'utf-7', 'no-such-charset']) {
      const res = await post(JSON.stringify(followUp), {
        'content-type': `application/json; charset=${charset}`,
      });
      expect(res.status, charset).toBe(415);
    }
  });

  it('answers 503 with Retry-After while other bodies hold the in-flight budget, then takes them again', async () => {
    // Two slow uploads of 48 KiB each hold 96 KiB: a third body does not fit until one ends.
    const body = JSON.stringify({ ...followUp, prompt: 'x'.repeat(48 * 1024 - 80) });
    const slow = [startUpload(body), startUpload(body)];
    try {
      const refused = await eventually(
        async () => {
          // Not a follow-up: should it get through, it is a 400 and nothing is enqueued.
          const res = await post(JSON.stringify({ junk: 'x'.repeat(1000) }));
          return res.status === 503 ? res : undefined;
        },
        { what: 'a 503 while two uploads hold the budget' },
      );
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await refused.json()).toMatchObject({
        error: expect.stringContaining('HTTP_BODY_INFLIGHT_MAX'),
      });
      const answers = await Promise.all(slow.map((upload) => upload.finish()));
      expect(answers).toEqual([202, 202]);
      expect((await post(JSON.stringify(followUp))).status).toBe(202);
    } finally {
      for (const upload of slow) upload.req.destroy();
    }
  });

  /** A POST whose body is written in part now and the rest on `finish()`. */
  function startUpload(body: string): { req: ClientRequest; finish(): Promise<number> } {
    const { hostname, port } = new URL(served.app.url);
    let status: Promise<number> = new Promise(() => {});
    const req = request({
      hostname,
      port,
      path: '/v1/followups',
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      },
    });
    status = new Promise((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
    });
    // Destroyed after a failed assertion: that rejection is not the test's answer.
    status.catch(() => {});
    req.write(body.slice(0, 100));
    return {
      req,
      finish() {
        req.end(body.slice(100));
        return status;
      },
    };
  }
});
