import { afterAll, describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { readEvents } from '../support/events.js';
import { withNamespace } from '../support/namespace.js';
import { bearerCall, expectNoLeakedHandles, startTestServer, useTestServer } from './fixture.js';

const TOKEN = 'controls-secret-token';
const PAGE_TOKEN = 'controls-page-token';

afterAll(() => expectNoLeakedHandles());

describe('the operator controls over HTTP', () => {
  const served = useTestServer(
    'http-controls',
    {
      INTAKE_TOKEN: 'controls-intake-token',
      OPERATOR_TOKEN: TOKEN,
      SEND_RATE_LIMIT: '100/1h',
      DASHBOARD_TOKEN: PAGE_TOKEN,
    },
    () => ({ withProducer: true }),
  );

  const call = bearerCall(served, TOKEN);
  const controlKeys = async () => {
    const keys = keysFor(served.ns.prefix);
    return served.ns.redis.exists(keys.projectControls('P'), keys.controlledProjects);
  };

  it('answers 401 to a wrong token on every route, and changes nothing', async () => {
    const enqueued = await served.app.producer?.send({ projectId: 'P', jobId: 'j', prompt: 'x' });
    for (const [method, path, body] of [
      ['POST', '/v1/projects/P/pause'],
      ['POST', '/v1/projects/P/resume'],
      ['PUT', '/v1/projects/P/limit', { limit: '1/1h' }],
      ['GET', '/v1/projects/P'],
      ['DELETE', `/v1/followups/${enqueued?.dispatchId}`],
    ] as const) {
      const res = await call(method, path, body, 'not-the-token-at-all');
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(await res.text()).not.toContain(TOKEN);
    }
    expect(await controlKeys()).toBe(0);
    expect((await served.app.producer?.status(enqueued?.dispatchId ?? ''))?.state).toBe('queued');
  });

  it('pauses, shows, limits and resumes a project', async () => {
    const pause = await call('POST', '/v1/projects/P/pause');
    expect(pause.status).toBe(200);
    expect(await pause.json()).toEqual({ projectId: 'P', paused: true, changed: true, woken: 0 });
    const limit = await call('PUT', '/v1/projects/P/limit', { limit: '50/1h' });
    expect(await limit.json()).toEqual({ projectId: 'P', limit: '50/1h', previous: null });
    const shown = await call('GET', '/v1/projects/P');
    expect(shown.status).toBe(200);
    expect(await shown.json()).toMatchObject({
      projectId: 'P',
      paused: true,
      limit: '50/1h',
      limitSource: 'project',
      sendsInWindow: 0,
      parkedUntil: null,
    });
    const cleared = await call('PUT', '/v1/projects/P/limit', { limit: null });
    expect(await cleared.json()).toEqual({ projectId: 'P', limit: null, previous: '50/1h' });
    const resume = await call('POST', '/v1/projects/P/resume');
    expect(await resume.json()).toMatchObject({ paused: false, changed: true });
    expect(await (await call('GET', '/v1/projects/P')).json()).toMatchObject({
      paused: false,
      limit: '100/1h',
      limitSource: 'default',
    });
    expect(await controlKeys()).toBe(0);
  });

  it('refuses a malformed limit with 400 naming the field, and changes nothing', async () => {
    for (const body of [{ limit: 'fast' }, { limit: '0/1h' }, { limit: 5 }, {}, ['50/1h']]) {
      const res = await call('PUT', '/v1/projects/P/limit', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await res.json()).toMatchObject({
        error: 'invalid limit',
        code: 'invalid_control',
        problems: [{ field: 'limit', message: expect.any(String) }],
      });
    }
    const form = await fetch(`${served.app.url}/v1/projects/P/limit`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/plain' },
      body: '50/1h',
    });
    expect(form.status).toBe(415);
    const longId = await call('POST', `/v1/projects/${'x'.repeat(201)}/pause`);
    expect(await longId.json()).toMatchObject({ problems: [{ field: 'projectId' }] });
    expect(await controlKeys()).toBe(0);
  });

  it('needs "force" for a limit looser than SEND_RATE_LIMIT; shows any stored limit, as does the page', async () => {
    const loose = await call('PUT', '/v1/projects/F/limit', { limit: '200/2h' });
    expect(loose.status).toBe(400);
    expect(await loose.json()).toMatchObject({
      problems: [{ field: 'limit', message: expect.stringMatching(/looser than SEND_RATE_LIMIT/) }],
    });
    const forced = await call('PUT', '/v1/projects/F/limit', { limit: '200/2h', force: true });
    expect([forced.status, await forced.json()]).toEqual([
      200,
      { projectId: 'F', limit: '200/2h', previous: null },
    ]);
    const badForce = await call('PUT', '/v1/projects/F/limit', { limit: '1/1h', force: 'yes' });
    expect(await badForce.json()).toMatchObject({ problems: [{ field: 'force' }] });
    // Written by hand: a limit past any date, garbage, and a controls key of the wrong type.
    const keys = keysFor(served.ns.prefix);
    await served.ns.redis.hset(keys.projectControls('F'), 'windowMs', '17280000001000000');
    await served.ns.redis.zadd(keys.budget('F'), Date.now(), 's:one');
    await served.ns.redis.hset(keys.projectControls('G'), { limit: 'x', max: 'y', windowMs: 'z' });
    await served.ns.redis.set(keys.projectControls('H'), 'garbage');
    await served.ns.redis.sadd(keys.controlledProjects, 'F', 'G', 'H');
    for (const projectId of ['F', 'G', 'H']) {
      const shown = await call('GET', `/v1/projects/${projectId}`);
      expect(shown.status, projectId).toBe(200);
      expect(await shown.json()).toMatchObject({
        problem: expect.stringMatching(/^invalid stored/),
      });
    }
    const page = await fetch(`${served.app.url}/dashboard/followups`, {
      headers: { authorization: `Bearer ${PAGE_TOKEN}` },
    });
    expect(page.status).toBe(200);
    const html = await page.text();
    for (const projectId of ['F', 'G', 'H']) expect(html).toContain(`data-project="${projectId}"`);
    expect(html).toContain('invalid stored limit');
    await call('PUT', '/v1/projects/F/limit', { limit: null });
    await call('PUT', '/v1/projects/G/limit', { limit: null });
    await served.ns.redis.del(keys.projectControls('H'));
    await served.ns.redis.srem(keys.controlledProjects, 'H');
  });

  it('cancels a queued follow-up; 409 with the state once it is past queued; 404 when unknown', async () => {
    const sent = await served.app.producer?.send({ projectId: 'Q', jobId: 'j', prompt: 'x' });
    const id = sent?.dispatchId ?? '';
    const cancel = await call('DELETE', `/v1/followups/${id}`);
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toEqual({
      dispatchId: id,
      state: 'done',
      type: 'followup.cancelled',
    });
    const again = await call('DELETE', `/v1/followups/${id}`);
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: 'not_cancellable', state: 'done' });
    const unknown = await call('DELETE', '/v1/followups/no-such-dispatch');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'unknown_dispatch' });
    const events = await readEvents(served.ns.redis, served.ns.eventsStream);
    expect(events.map((e) => [e.type, e.dispatchId])).toEqual([['followup.cancelled', id]]);
  });
});

describe('the operator controls without OPERATOR_TOKEN', () => {
  it('answer 404 saying how to turn them on', async () => {
    await withNamespace('http-controls-off', async (ns) => {
      const app = await startTestServer(ns.config());
      try {
        for (const [method, path] of [
          ['POST', '/v1/projects/P/pause'],
          ['DELETE', '/v1/followups/x'],
        ] as const) {
          const res = await fetch(`${app.url}${path}`, { method });
          expect(res.status).toBe(404);
          expect(await res.json()).toMatchObject({
            error: expect.stringMatching(/OPERATOR_TOKEN/),
          });
        }
      } finally {
        await app.close();
      }
    });
  });
});
