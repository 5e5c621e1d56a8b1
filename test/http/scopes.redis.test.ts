import express from 'express';
import { afterAll, describe, expect, it } from 'vitest';
import { installScopes, requireScope } from '../../src/http/scopes.js';
import { keysFor } from '../../src/redis/keys.js';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

/** Each scope's tokens; the intake has two, as during a rotation. */
const INTAKE_OLD = 'intake-old-token-0001';
const INTAKE_NEW = 'intake-new-token-0002';
const EVENTS = 'events-token-00000003';
const OPERATOR = 'operator-token-000004';
const DASHBOARD = 'dashboard-token-00005';

afterAll(() => expectNoLeakedHandles());

describe('scoped tokens', () => {
  const served = useTestServer(
    'http-scopes',
    {
      INTAKE_TOKEN: `${INTAKE_OLD}, ${INTAKE_NEW}`,
      EVENTS_TOKEN: EVENTS,
      OPERATOR_TOKEN: OPERATOR,
      DASHBOARD_TOKEN: DASHBOARD,
      DASHBOARD_ALLOW_CONTROLS: 'true',
    },
    () => ({ withProducer: true }),
  );
  const call = (method: string, path: string, token?: string, body?: unknown) =>
    fetch(`${served.app.url}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const followUp = { projectId: 'P', jobId: 'j', prompt: 'hello' };

  it('takes every intake token of the list, and refuses other scopes with 403 naming intake', async () => {
    for (const token of [INTAKE_OLD, INTAKE_NEW])
      expect((await call('POST', '/v1/followups', token, followUp)).status).toBe(202);
    for (const token of [EVENTS, OPERATOR, DASHBOARD]) {
      const res = await call('POST', '/v1/followups', token, followUp);
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({
        error: expect.stringMatching(/intake scope.*INTAKE_TOKEN/),
        scope: 'intake',
      });
    }
  });

  it('answers 401 without a token or with an unknown one, never echoing it', async () => {
    const missing = await call('POST', '/v1/followups', undefined, followUp);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toMatch(/^Bearer /);
    const unknown = await call('GET', '/v1/projects/P', 'not-a-token-of-any-scope');
    expect(unknown.status).toBe(401);
    expect(await unknown.text()).not.toContain('not-a-token');
  });

  it('keeps a producer from operating: no pause, no cancel, nothing written', async () => {
    const sent = await (await call('POST', '/v1/followups', INTAKE_NEW, followUp)).json();
    const { dispatchId } = sent as { dispatchId: string };
    const pause = await call('POST', '/v1/projects/P/pause', INTAKE_NEW);
    expect(pause.status).toBe(403);
    expect(await pause.json()).toMatchObject({ scope: 'operator' });
    expect((await call('DELETE', `/v1/followups/${dispatchId}`, INTAKE_NEW)).status).toBe(403);
    const keys = keysFor(served.ns.prefix);
    expect(await served.ns.redis.exists(keys.projectControls('P'), keys.controlledProjects)).toBe(
      0,
    );
    // The operator may; the producer may read the state it ended in.
    expect((await call('DELETE', `/v1/followups/${dispatchId}`, OPERATOR)).status).toBe(200);
    const status = await call('GET', `/v1/followups/${dispatchId}`, INTAKE_OLD);
    expect(await status.json()).toMatchObject({ state: 'done' });
    expect((await call('GET', `/v1/followups/${dispatchId}`, OPERATOR)).status).toBe(403);
  });

  it('shows the pages to a dashboard token without buttons, and lets only an operator press them', async () => {
    const viewer = await call('GET', '/dashboard/followups', DASHBOARD);
    expect(viewer.status).toBe(200);
    expect(await viewer.text()).not.toContain('<button');
    const press = await call('POST', '/dashboard/followups/projects/Q/pause', DASHBOARD);
    expect(press.status).toBe(403);
    expect(await press.json()).toMatchObject({ scope: 'operator' });
    expect((await call('GET', '/dashboard/followups', INTAKE_NEW)).status).toBe(401);
    const operator = await call('POST', '/dashboard/followups/projects/Q/pause', OPERATOR);
    expect(operator.status).toBe(303);
    const page = await call('GET', '/dashboard/followups', OPERATOR);
    expect(await page.text()).toContain('<button');
  });
});

describe('requireScope on a route of another module', () => {
  it('mounts with one call and answers 404 naming the setting while its scope is off', async () => {
    const app = express();
    installScopes(app, {
      intake: ['intake-token-000000'],
      events: [],
      operator: [],
      dashboard: [],
    });
    app.get('/v1/events', requireScope('events'), (_req, res) => {
      res.json({ events: [] });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const { port } = server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${port}/v1/events`, {
        headers: { authorization: 'Bearer intake-token-000000' },
      });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: expect.stringContaining('EVENTS_TOKEN') });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
