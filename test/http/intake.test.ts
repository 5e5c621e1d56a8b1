import { afterAll, describe, expect, it } from 'vitest';
import { intakeBodyLimitBytes } from '../../src/http/index.js';
import { loadConfig } from '../../src/config/index.js';
import { RedisUnavailableError, type Producer } from '../../src/producer/index.js';
import { completedStatus, waitForEvents } from '../support/events.js';
import { withNamespace } from '../support/namespace.js';
import { startService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';
import { expectNoLeakedHandles, startTestServer, useTestServer } from './fixture.js';

const TOKEN = 'intake-secret-token';
const PROMPT_MAX_BYTES = 100;

// Runs after every describe block's own cleanup.
afterAll(() => expectNoLeakedHandles());

describe('POST /v1/followups', () => {
  const served = useTestServer(
    'intake',
    { INTAKE_TOKEN: TOKEN, PROMPT_MAX_BYTES: String(PROMPT_MAX_BYTES) },
    () => ({ withProducer: true }),
  );

  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${served.app.url}/v1/followups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
      body,
    });
  const followUp = (n: number, extra: Record<string, unknown> = {}) => ({
    projectId: 'p1',
    jobId: `job-${n}`,
    prompt: `prompt ${n}`,
    ...extra,
  });

  it('answers 401 without a token or with a wrong one, and never echoes it', async () => {
    const missing = await post('{}', { authorization: '' });
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ error: expect.stringMatching(/Bearer/) });
    const wrong = await post('{}', { authorization: 'Bearer not-the-token' });
    expect(wrong.status).toBe(401);
    const text = await wrong.text();
    expect(JSON.parse(text)).toHaveProperty('error');
    expect(text).not.toContain('not-the-token');
    expect(text).not.toContain(TOKEN);
  });

  it('answers 400 naming the field for invalid follow-ups', async () => {
    const single = await post(JSON.stringify({ projectId: 'p1', jobId: 'j1', prompt: '' }));
    expect(single.status).toBe(400);
    expect(await single.json()).toEqual({
      error: 'invalid follow-up',
      code: 'invalid_followup',
      problems: [{ field: 'prompt', message: expect.any(String) }],
    });

    const batch = await post(JSON.stringify([followUp(1), { ...followUp(2), meta: 'x' }]));
    expect(batch.status).toBe(400);
    const { problems } = (await batch.json()) as { problems: unknown[] };
    expect(problems).toEqual([{ field: 'meta', message: expect.any(String), index: 1 }]);

    const tooLong = await post(
      JSON.stringify(followUp(3, { prompt: 'x'.repeat(PROMPT_MAX_BYTES + 1) })),
    );
    expect(((await tooLong.json()) as { problems: { field: string }[] }).problems[0]?.field).toBe(
      'prompt',
    );
  });

  it('answers 400 for bad JSON and for bodies of the wrong shape', async () => {
    const badJson = await post('{"projectId": ');
    expect(badJson.status).toBe(400);
    expect(await badJson.json()).toEqual({ error: 'request body is not valid JSON' });
    for (const body of ['"text"', '42', 'null', '[]', '{"followups": {}}']) {
      const res = await post(body);
      expect(res.status, body).toBe(400);
      expect(
        ((await res.json()) as { problems: { field: string }[] }).problems[0]?.field,
        body,
      ).toBe('(body)');
    }
    const tooMany = await post(JSON.stringify(Array.from({ length: 1001 }, (_, i) => followUp(i))));
    expect(tooMany.status).toBe(400);
    const form = await post('a=b', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.status).toBe(415);
  });

  it('answers 413 for a body over the limit', async () => {
    const limit = intakeBodyLimitBytes(PROMPT_MAX_BYTES, loadConfig({}).httpBodyMaxBytes);
    const res = await post(JSON.stringify({ followups: [], padding: 'x'.repeat(limit) }));
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: expect.stringMatching(/larger than/) });
  });

  it('accepts one follow-up with 202 and records the dispatch', async () => {
    const res = await post(JSON.stringify(followUp(10, { meta: { ticket: 7 } })));
    expect(res.status).toBe(202);
    const body = (await res.json()) as { dispatchId: string; deduplicated: boolean };
    expect(body).toEqual({ dispatchId: expect.any(String), deduplicated: false });
    const status = await served.app.producer?.status(body.dispatchId);
    expect(status).toMatchObject({
      projectId: 'p1',
      jobId: 'job-10',
      state: 'queued',
      meta: { ticket: 7 },
    });
  });

  it('accepts a batch, as an array or as {"followups": [...]}', async () => {
    for (const payload of [
      [followUp(20), followUp(21)],
      { followups: [followUp(22), followUp(23)] },
    ]) {
      const res = await post(JSON.stringify(payload));
      expect(res.status).toBe(202);
      const { results } = (await res.json()) as {
        results: { dispatchId: string; deduplicated: boolean }[];
      };
      expect(results).toHaveLength(2);
      for (const result of results) {
        expect(result.deduplicated).toBe(false);
        expect(await served.app.producer?.status(result.dispatchId)).toMatchObject({
          state: 'queued',
        });
      }
    }
  });

  it('deduplicates by key', async () => {
    const body = JSON.stringify(followUp(30, { key: 'order-30' }));
    const first = (await (await post(body)).json()) as {
      dispatchId: string;
      deduplicated: boolean;
    };
    const second = (await (await post(body)).json()) as {
      dispatchId: string;
      deduplicated: boolean;
    };
    expect(first.deduplicated).toBe(false);
    expect(second).toEqual({ dispatchId: first.dispatchId, deduplicated: true });
  });

  it('answers 409 naming key when a key comes back with different content', async () => {
    const first = (await (
      await post(JSON.stringify(followUp(31, { key: 'order-31' })))
    ).json()) as {
      dispatchId: string;
    };
    const single = await post(JSON.stringify(followUp(31, { key: 'order-31', prompt: 'changed' })));
    expect(single.status).toBe(409);
    expect(await single.json()).toEqual({
      error: expect.stringMatching(/idempotency key/),
      code: 'idempotency_conflict',
      problems: [{ field: 'key', message: expect.any(String), dispatchId: first.dispatchId }],
    });

    const batch = await post(
      JSON.stringify([followUp(32), followUp(31, { key: 'order-31', prompt: 'changed' })]),
    );
    expect(batch.status).toBe(409);
    const body = (await batch.json()) as {
      problems: unknown[];
      results: ({ dispatchId: string } | null)[];
    };
    expect(body).toMatchObject({
      code: 'idempotency_conflict',
      problems: [{ index: 1, field: 'key', dispatchId: first.dispatchId }],
      results: [{ dispatchId: expect.any(String), deduplicated: false }, null],
    });
    // The batch's other follow-up was enqueued: the answer says so, and it is there.
    const enqueued = body.results[0]?.dispatchId ?? '';
    expect(await served.app.producer?.status(enqueued)).toMatchObject({ state: 'queued' });
  });

  it('answers 400 naming meta, not 503, for a meta nested 1,500 levels deep', async () => {
    for (const meta of [
      `{"x":${'['.repeat(1500)}${']'.repeat(1500)}}`,
      `{"x":${'{"a":'.repeat(1500)}1${'}'.repeat(1500)}}`,
    ]) {
      const res = await post(`{"projectId":"p1","jobId":"deep","prompt":"x","meta":${meta}}`);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        error: 'invalid follow-up',
        code: 'invalid_followup',
        problems: [{ field: 'meta', message: expect.stringMatching(/levels/) }],
      });
    }
    const batch = await post(
      `[${JSON.stringify(followUp(50))},{"projectId":"p1","jobId":"deep","prompt":"x","meta":{"x":${'['.repeat(1500)}${']'.repeat(1500)}}}]`,
    );
    expect(batch.status).toBe(400);
    expect(((await batch.json()) as { problems: unknown[] }).problems).toEqual([
      { index: 1, field: 'meta', message: expect.stringMatching(/levels/) },
    ]);
  });

  it('answers GET /v1/followups/:id with the status, or 404', async () => {
    const { dispatchId } = (await (await post(JSON.stringify(followUp(40)))).json()) as {
      dispatchId: string;
    };
    const auth = { authorization: `Bearer ${TOKEN}` };
    const found = await fetch(`${served.app.url}/v1/followups/${dispatchId}`, { headers: auth });
    expect(found.status).toBe(200);
    expect(await found.json()).toMatchObject({
      dispatchId,
      projectId: 'p1',
      jobId: 'job-40',
      state: 'queued',
    });
    expect(JSON.stringify(await served.app.producer?.status(dispatchId))).not.toContain(
      'prompt 40',
    );

    const missing = await fetch(`${served.app.url}/v1/followups/no-such-dispatch`, {
      headers: auth,
    });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toHaveProperty('error');
    expect((await fetch(`${served.app.url}/v1/followups/${dispatchId}`)).status).toBe(401);
  });

  it('answers unknown routes with JSON 404', async () => {
    const res = await fetch(`${served.app.url}/nope`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/json/);
  });
});

describe('the intake when the producer fails', () => {
  it('answers 503 only for Redis being unavailable; another failure is a 500, never a retry', async () => {
    await withNamespace('intake-failures', async (ns) => {
      let failure: Error = new Error('unset');
      const failing: Producer = {
        send: () => Promise.reject(failure),
        sendMany: () => Promise.reject(failure),
        create: () => Promise.reject(failure),
        status: () => Promise.reject(failure),
        cancel: () => Promise.reject(failure),
        close: () => Promise.resolve(),
      };
      const app = await startTestServer(ns.config({ INTAKE_TOKEN: TOKEN }), { producer: failing });
      const post = () =>
        fetch(`${app.url}/v1/followups`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'x' }),
        });
      try {
        failure = new RangeError('Maximum call stack size exceeded');
        const bug = await post();
        expect([bug.status, bug.headers.get('retry-after')]).toEqual([500, null]);
        expect(await bug.json()).toEqual({ error: 'internal error; see the server log' });
        failure = new RedisUnavailableError(5_000);
        const down = await post();
        expect([down.status, down.headers.get('retry-after')]).toEqual([503, '5']);
      } finally {
        await app.close();
      }
    });
  });
});

describe('GET /v1/followups/:id after the end', () => {
  const simulator = useSimulator({ workTimeMs: 100 });

  it('answers 200 with state done, the event type, reason and prLink; 404 for an unknown id', async () => {
    await withNamespace('intake-ended', async (ns) => {
      const app = await startTestServer(ns.config({ INTAKE_TOKEN: TOKEN }), { withProducer: true });
      const service = startService(ns, simulator());
      const auth = { authorization: `Bearer ${TOKEN}` };
      try {
        simulator().seedJob('p1', 'ended');
        const posted = await fetch(`${app.url}/v1/followups`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ projectId: 'p1', jobId: 'ended', prompt: 'the end' }),
        });
        const { dispatchId } = (await posted.json()) as { dispatchId: string };
        const [event] = await waitForEvents(ns.redis, ns.eventsStream, 1);
        expect(event).toMatchObject({ dispatchId, type: 'followup.completed' });

        const found = await fetch(`${app.url}/v1/followups/${dispatchId}`, { headers: auth });
        expect(found.status).toBe(200);
        expect(await found.json()).toMatchObject({
          dispatchId,
          ...completedStatus(event),
        });
        expect(event?.prLink).toMatch(/^https:\/\//);
        const missing = await fetch(`${app.url}/v1/followups/no-such-dispatch`, { headers: auth });
        expect(missing.status).toBe(404);
      } finally {
        await service.close();
        await app.close();
      }
    });
  });
});

describe('the intake without INTAKE_TOKEN', () => {
  it('answers 404 with an explanation', async () => {
    await withNamespace('intake-off', async (ns) => {
      const app = await startTestServer(ns.config(), { withProducer: true });
      try {
        const res = await fetch(`${app.url}/v1/followups`, { method: 'POST', body: '{}' });
        expect(res.status).toBe(404);
        expect(await res.json()).toMatchObject({ error: expect.stringContaining('INTAKE_TOKEN') });
      } finally {
        await app.close();
      }
    });
  });
});
