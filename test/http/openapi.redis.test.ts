import type { Express } from 'express';
import { OpenAPIBackend } from 'openapi-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { keysFor } from '../../src/redis/keys.js';
import { DispatchStore } from '../../src/store/store.js';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

const INTAKE = 'openapi-intake-token-1';
const OPERATOR = 'openapi-operator-token';
const EVENTS = 'openapi-events-token-1';

/** Every `METHOD /path` the app registers under `/v1`, paths written as OpenAPI writes them. */
function v1Routes(app: Express): string[] {
  type Layer = {
    route?: { path: string; methods: Record<string, boolean> };
    handle?: { stack?: Layer[] };
  };
  const walk = (stack: readonly Layer[]): string[] =>
    stack.flatMap((layer) =>
      layer.route
        ? Object.keys(layer.route.methods).map(
            (m) => `${m} ${layer.route?.path.replace(/:(\w+)/g, '{$1}') ?? ''}`,
          )
        : walk(layer.handle?.stack ?? []),
    );
  const router = (app as unknown as { router: { stack: Layer[] } }).router;
  return walk(router.stack).filter((route) => route.split(' ')[1]?.startsWith('/v1'));
}

afterAll(() => expectNoLeakedHandles());

describe('GET /openapi.json', () => {
  const served = useTestServer(
    'http-openapi',
    { INTAKE_TOKEN: INTAKE, OPERATOR_TOKEN: OPERATOR, EVENTS_TOKEN: EVENTS },
    () => ({ withProducer: true }),
  );
  let document: Record<string, unknown>;
  let api: OpenAPIBackend;
  beforeAll(async () => {
    const res = await fetch(`${served.app.url}/openapi.json`);
    expect(res.status).toBe(200);
    document = (await res.json()) as Record<string, unknown>;
    // quick: its own check of the document knows OpenAPI 3.0 only (propertyNames is 3.1's).
    api = new OpenAPIBackend({
      definition: structuredClone(document) as never,
      strict: true,
      quick: true,
      // A follow-up's `expiresAt` is a `date-time`: checked, not ignored as an unknown format.
      customizeAjv: (ajv) =>
        ajv.addFormat('date-time', {
          type: 'string',
          validate: (s: string) => !Number.isNaN(Date.parse(s)),
        }),
    });
    await api.init();
  });

  /** Calls a route and checks its request and its real answer against the document. */
  const check = async (method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${served.app.url}${path}`, {
      method,
      headers: {
        ...(token && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const answer: unknown = await res.json();
    const operation = api.matchOperation({ method, path, headers: {} });
    expect(operation, `${method} ${path} is documented`).toBeDefined();
    if (!operation) return answer;
    const documented = Object.keys(operation.responses ?? {});
    expect(documented, `${method} ${path} documents ${res.status}`).toContain(String(res.status));
    const valid = api.validateResponse(answer, operation, res.status);
    expect(
      valid.errors ?? [],
      `${method} ${path} ${res.status}: ${JSON.stringify(answer)}`,
    ).toEqual([]);
    if (res.status < 400 && body !== undefined) {
      const request = { method, path, headers: { 'content-type': 'application/json' }, body };
      expect(api.validateRequest(request, operation).errors ?? []).toEqual([]);
    }
    return answer;
  };

  it('is OpenAPI 3.1 with a bearer scheme per scope and every /v1 route', () => {
    expect(document['openapi']).toBe('3.1.0');
    const components = document['components'] as { securitySchemes: Record<string, unknown> };
    expect(Object.keys(components.securitySchemes)).toEqual([
      'intake',
      'events',
      'operator',
      'dashboard',
    ]);
    const paths = Object.keys(document['paths'] as object);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/v1/followups',
        '/v1/followups/{dispatchId}',
        '/v1/projects/{projectId}/pause',
        '/v1/projects/{projectId}/resume',
        '/v1/projects/{projectId}/limit',
        '/v1/projects/{projectId}',
      ]),
    );
  });

  it('documents every /v1 route the app registers', () => {
    const registered = v1Routes(served.app.server.app);
    // The events routes, the webhooks' and the rest: a route added without describeRoute fails here.
    expect(registered.length).toBeGreaterThanOrEqual(14);
    const paths = document['paths'] as Record<string, Record<string, unknown>>;
    const documented = Object.entries(paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    expect(documented.sort()).toEqual([...new Set(registered)].sort());
  });

  it('matches the real answers of every route, errors included', async () => {
    const one = { projectId: 'P', jobId: 'j', prompt: 'hi', key: null, meta: { n: 1 } };
    const sent = (await check('POST', '/v1/followups', INTAKE, one)) as { dispatchId: string };
    await check('POST', '/v1/followups', INTAKE, { followups: [{ ...one, key: 'k-1' }] });
    await check('POST', '/v1/followups', INTAKE, [{ ...one, key: 'k-2' }]);
    // A creation and a follow-up chained to it, in one batch; a creation's cancel.
    const [made] = (
      (await check('POST', '/v1/followups', INTAKE, [
        { projectId: 'P', prompt: 'make', key: 'c-1', create: true },
        { projectId: 'P', prompt: 'next', after: 'c-1' },
      ])) as { results: { dispatchId: string }[] }
    ).results;
    const cancelled = await check('DELETE', `/v1/followups/${made!.dispatchId}`, OPERATOR);
    expect(cancelled).toMatchObject({ type: 'job.cancelled' });
    await check('POST', '/v1/followups', INTAKE, { projectid: 'P', jobId: 'j', prompt: 'x' });
    const timed = (await check('POST', '/v1/followups', INTAKE, { ...one, ttl: '30m' })) as {
      dispatchId: string;
    };
    const expiresAt = new Date(Date.now() + 60_000).toISOString();
    await check('POST', '/v1/followups', INTAKE, [{ ...one, expiresAt }]);
    await check('POST', '/v1/followups', INTAKE, { ...one, ttl: '0s' });
    await check('GET', `/v1/followups/${timed.dispatchId}`, INTAKE);
    await check('POST', '/v1/followups', undefined, one);
    await check('POST', '/v1/followups', OPERATOR, one);
    await check('GET', `/v1/followups/${sent.dispatchId}`, INTAKE);
    await check('GET', '/v1/followups/no-such-dispatch', INTAKE);
    await check('DELETE', `/v1/followups/${sent.dispatchId}`, OPERATOR);
    await check('DELETE', `/v1/followups/${sent.dispatchId}`, OPERATOR);
    await check('DELETE', `/v1/followups/${sent.dispatchId}`, INTAKE);
    // A dead letter: planned, redriven, refused (the cancelled one), and a bad body.
    const store = new DispatchStore(served.ns.redis, keysFor(served.ns.prefix), {
      eventsStream: served.ns.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
    });
    const dead = (await check('POST', '/v1/followups', INTAKE, { ...one, jobId: 'dead' })) as {
      dispatchId: string;
    };
    await store.finish((await store.sends.get(dead.dispatchId))!, {
      type: EVENT_TYPES.undeliverable,
      reason: 'not_found',
    });
    const redrive = { project: 'P', reason: 'not_found' };
    const planned = await check('POST', '/v1/redrive', OPERATOR, { ...redrive, dryRun: true });
    expect(planned).toMatchObject({ results: [{ dispatchId: dead.dispatchId, dryRun: true }] });
    await check('POST', '/v1/redrive', OPERATOR, redrive);
    const ids = { dispatchIds: [dead.dispatchId, sent.dispatchId] };
    const answered = await check('POST', '/v1/redrive', OPERATOR, ids);
    expect(answered).toMatchObject({ results: [{ created: false }, { why: 'not_dead_letter' }] });
    await check('POST', '/v1/redrive', OPERATOR, { projectId: 'P' });
    await check('POST', '/v1/redrive', INTAKE, {});
    await check('POST', '/v1/projects/P/pause', OPERATOR);
    await check('POST', '/v1/projects/P/resume', OPERATOR);
    await check('POST', '/v1/projects/P/unpark', OPERATOR);
    await check('POST', '/v1/projects/P/unpark', INTAKE);
    await check('PUT', '/v1/projects/P/limit', OPERATOR, { limit: '50/1h' });
    await check('PUT', '/v1/projects/P/limit', OPERATOR, { limit: 'lots' });
    await check('PUT', '/v1/projects/P/limit', OPERATOR, { limit: null });
    await check('GET', '/v1/projects/P', OPERATOR);
    // A limit past any date, as written by hand: no next slot, and a `problem`.
    const keys = keysFor(served.ns.prefix);
    await served.ns.redis.hset(keys.projectControls('F'), {
      limit: '1/200000000d',
      max: '1',
      windowMs: '17280000001000000',
    });
    await served.ns.redis.zadd(keys.budget('F'), Date.now(), 's:one');
    const shown = await check('GET', '/v1/projects/F', OPERATOR);
    expect(shown).toMatchObject({ nextSlotAt: null, problem: expect.stringMatching(/^invalid/) });
  });

  it('matches the real answers of the events routes', async () => {
    const one = { projectId: 'E', jobId: 'j', prompt: 'hi' };
    const sent = (await check('POST', '/v1/followups', INTAKE, one)) as { dispatchId: string };
    await check('DELETE', `/v1/followups/${sent.dispatchId}`, OPERATOR);
    const page = (await check('GET', '/v1/events?limit=10&project=E', EVENTS)) as {
      events: { type: string }[];
      next: string;
    };
    expect(page.events.map((e) => e.type)).toEqual(['followup.cancelled']);
    await check('GET', `/v1/events?after=${page.next}&type=cancelled`, EVENTS);
    await check('GET', '/v1/events?limit=0', EVENTS);
    await check('GET', '/v1/events?type=nope', EVENTS);
    await check('GET', '/v1/events', OPERATOR);
    await check('GET', '/v1/events/stream?after=bad', EVENTS);
    await check('GET', '/v1/events/stream', undefined);
  });

  it('documents the event stream as text/event-stream and serves it so', async () => {
    const stop = new AbortController();
    const res = await fetch(`${served.app.url}/v1/events/stream`, {
      headers: { authorization: `Bearer ${EVENTS}` },
      signal: stop.signal,
    });
    const operation = api.matchOperation({ method: 'GET', path: '/v1/events/stream', headers: {} });
    const content = (operation?.responses?.['200'] as { content?: object } | undefined)?.content;
    expect(Object.keys(content ?? {})).toEqual(['text/event-stream']);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = res.body?.getReader();
    let text = '';
    while (reader && !text.includes('\n\n')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text.split('\n\n')[0]).toMatch(/^retry: \d+$/);
    stop.abort();
    await reader?.cancel().catch(() => undefined);
  });

  it('matches the real answers of the webhook routes', async () => {
    const hook = { url: 'http://127.0.0.1:9/hook', projects: ['P'], types: ['followup.*'] };
    const added = (await check('POST', '/v1/webhooks', OPERATOR, hook)) as { id: string };
    await check('POST', '/v1/webhooks', OPERATOR, { url: 'ftp://x' });
    await check('POST', '/v1/webhooks', OPERATOR, { url: 'http://x', types: [7] });
    await check('POST', '/v1/webhooks', INTAKE, hook);
    const listed = (await check('GET', '/v1/webhooks', OPERATOR)) as { webhooks: object[] };
    expect(listed.webhooks).toHaveLength(1);
    await check('GET', '/v1/webhooks/dead?limit=5', OPERATOR);
    await check('GET', '/v1/webhooks/dead?limit=0', OPERATOR);
    await check('POST', `/v1/webhooks/redrive?subscription=${added.id}`, OPERATOR);
    await check('DELETE', `/v1/webhooks/${added.id}`, OPERATOR);
    await check('DELETE', `/v1/webhooks/${added.id}`, OPERATOR);
    await check('GET', '/v1/webhooks', undefined);
  });

  it('would catch an answer of another shape', () => {
    const operation = api.matchOperation({ method: 'POST', path: '/v1/followups', headers: {} });
    expect(operation).toBeDefined();
    if (!operation) return;
    expect(api.validateResponse({ dispatchId: 7 }, operation, 202).errors).not.toBeNull();
    expect(api.validateResponse({ message: 'x' }, operation, 400).errors).not.toBeNull();
  });
});
