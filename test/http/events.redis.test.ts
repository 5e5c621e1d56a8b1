import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventBody } from '../../src/dispatch/event-body.js';
import { layoutKey, shardLayout } from '../../src/redis/keys.js';
import { waitForEvents } from '../support/events.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { startService, type InProcessService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';
import { openSse, type SseClient } from '../support/sse.js';
import { expectNoLeakedHandles, startTestServer, type TestServer } from './fixture.js';

const TOKEN = 'events-secret-token';
const auth = { authorization: `Bearer ${TOKEN}` };

afterAll(() => expectNoLeakedHandles());

describe('GET /v1/events across shards', () => {
  const ns = useNamespace('http-events', { scope: 'all', shards: 2 });
  let app: TestServer;
  let streams: string[];
  beforeAll(async () => {
    app = await startTestServer(ns().config({ EVENTS_TOKEN: TOKEN, DISPATCH_SHARDS: '2' }));
    streams = shardLayout(ns().prefix, ns().eventsStream, 2, false).map((s) => s.eventsStream);
  });
  afterAll(() => app?.close());

  /** Adds an event with the explicit id `id` to shard `shard`'s stream. */
  const add = (shard: number, id: string, projectId = 'p', type = 'followup.completed') => {
    const event = JSON.stringify({ dispatchId: `d${id}`, projectId, jobId: 'j', meta: { id } });
    const fields = ['type', type, 'dispatchId', `d${id}`, 'projectId', projectId, 'jobId', 'j'];
    return ns().redis.xadd(streams[shard] ?? '', id, ...fields, 'event', event, 'v', '1');
  };
  const page = async (query: string, headers: Record<string, string> = auth) => {
    const res = await fetch(`${app.url}/v1/events${query}`, { headers });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const ids = (body: Record<string, unknown>) =>
    (body['events'] as { dispatchId: string }[]).map((e) => e.dispatchId);

  it('answers 401 without the token or with another one', async () => {
    expect((await page('', {})).status).toBe(401);
    const wrong = await page('', { authorization: 'Bearer not-the-events-token' });
    expect(wrong.status).toBe(401);
    expect(JSON.stringify(wrong.body)).not.toContain(TOKEN);
  });

  it('pages every shard in one order, nothing skipped or repeated, while events are written', async () => {
    for (const id of ['10-0', '20-0', '30-0', '40-0']) await add(0, id);
    await add(1, '15-0');
    const first = await page('?limit=3');
    expect(first.status).toBe(200);
    expect(ids(first.body)).toEqual(['d10-0', 'd15-0', 'd20-0']);
    expect(first.body['next']).toBe('20-0_15-0');
    // The body is the stream's `event` object plus `type`.
    expect((first.body['events'] as unknown[])[0]).toEqual({
      type: 'followup.completed',
      dispatchId: 'd10-0',
      projectId: 'p',
      jobId: 'j',
      meta: { id: '10-0' },
    });
    // Shard 1 writes, after the first page, an entry older than its last one.
    await add(1, '17-0');
    const second = await page(`?limit=3&after=${String(first.body['next'])}`);
    expect(ids(second.body)).toEqual(['d17-0', 'd30-0', 'd40-0']);
    const third = await page(`?after=${String(second.body['next'])}`);
    expect(third.body).toEqual({ events: [], next: second.body['next'] });
  });

  it('filters by project and type, and names a bad parameter in a 400', async () => {
    await add(1, '50-0', 'other', 'followup.undeliverable');
    const other = await page('?project=other&type=undeliverable');
    expect(ids(other.body)).toEqual(['d50-0']);
    expect((await page('?project=other&type=followup.completed')).body['events']).toEqual([]);
    for (const [query, named] of [
      ['?after=10-0', 'after: '],
      ['?after=yesterday', 'after: '],
      // Past what a stream id holds (64-bit parts): Redis refuses it, the client must hear why.
      ['?after=99999999999999999999-0_1-0', 'after: '],
      ['?after=1-0_18446744073709551615-18446744073709551615', 'after: '],
      ['?limit=0', 'limit: '],
      ['?type=done', 'type: '],
    ] as const) {
      const bad = await page(query);
      expect(bad.status, query).toBe(400);
      expect(String(bad.body['error'])).toMatch(new RegExp(`^${named}`));
      // A bad cursor carries CursorError's code; `limit` and `type` have none of their own.
      expect(bad.body['code'], query).toBe(named === 'after: ' ? 'invalid_cursor' : undefined);
    }
  });

  it('answers 410 with the next cursor past events trimmed after the cursor, 400 one ahead', async () => {
    for (const id of ['60-0', '61-0', '62-0', '63-0']) await add(0, id);
    await ns().redis.xtrim(streams[0] ?? '', 'MAXLEN', 2);
    const gone = await page('?after=60-0_50-0');
    expect(gone.status).toBe(410);
    expect(String(gone.body['error'])).toMatch(
      /^after: shard 0's stream was trimmed \(EVENTS_MAXLEN\)/,
    );
    expect(gone.body['code']).toBe('events_trimmed');
    // Just below the oldest kept, 62-0.
    expect(gone.body['next']).toBe(`61-${2n ** 64n - 1n}_50-0`);
    expect(ids((await page(`?after=${String(gone.body['next'])}`)).body)).toEqual([
      'd62-0',
      'd63-0',
    ]);
    const ahead = await page('?after=63-0_9999999999999-0');
    expect(ahead.status).toBe(400);
    expect(String(ahead.body['error'])).toMatch(/^after: the cursor is ahead of shard 1's stream/);
    expect(ahead.body['code']).toBe('cursor_ahead');
    const stream = await fetch(`${app.url}/v1/events/stream`, {
      headers: { ...auth, 'last-event-id': '60-0_50-0' },
    });
    expect(stream.status).toBe(410);
    expect(((await stream.json()) as { next: string }).next).toBe(gone.body['next']);
  });

  it('answers 500 naming DISPATCH_SHARDS on a server whose count is not the one recorded', async () => {
    await ns().redis.set(layoutKey(ns().prefix), '2');
    const other = await startTestServer(ns().config({ EVENTS_TOKEN: TOKEN, DISPATCH_SHARDS: '3' }));
    try {
      const res = await fetch(`${other.url}/v1/events`, { headers: auth });
      expect(res.status).toBe(500);
      expect(((await res.json()) as { error: string }).error).toMatch(
        /^DISPATCH_SHARDS: is 3\b.*records 2/,
      );
    } finally {
      await other.close();
    }
  });
});

describe('GET /v1/events/stream', () => {
  const simulator = useSimulator({ workTimeMs: 50 });
  const ns = useNamespace('http-events-sse', { scope: 'all' });
  let service: InProcessService;
  let app: TestServer;
  const open: SseClient[] = [];
  beforeAll(async () => {
    service = startService(ns(), simulator());
    simulator().seedJob('p1', 'j1');
    simulator().seedJob('p2', 'j2');
    app = await startTestServer(ns().config({ EVENTS_TOKEN: TOKEN }), {
      events: { heartbeatMs: 100, maxStreams: 1, pollMs: 50 },
    });
  });
  afterAll(async () => {
    for (const client of open) client.close();
    await app?.close();
    await service?.close();
  });
  const stream = async (query = '', headers: Record<string, string> = {}) => {
    const client = await openSse(`${app.url}/v1/events/stream${query}`, { ...auth, ...headers });
    open.push(client);
    return client;
  };

  it('sends the kept events, then new ones as they come, with heartbeats; one stream at most', async () => {
    await service.producer.send({ projectId: 'p1', jobId: 'j1', prompt: 'one' });
    const [kept] = await waitForEvents(ns().redis, ns().eventsStream, 1);
    const client = await stream();
    expect(client.status).toBe(200);
    const [first] = await client.waitFor(1);
    const entries = await ns().redis.xrange(ns().eventsStream, '-', '+');
    expect(first).toEqual({ id: kept?.id, data: eventBody(entries[0]?.[1] ?? []) });
    expect(first?.data).toMatchObject({ type: 'followup.completed', projectId: 'p1' });
    await service.producer.send({ projectId: 'p2', jobId: 'j2', prompt: 'two' });
    const [, second] = await client.waitFor(2);
    expect(second?.data).toMatchObject({ type: 'followup.completed', projectId: 'p2' });
    await eventually(() => (client.comments.includes('heartbeat') ? true : undefined));
    const refused = await fetch(`${app.url}/v1/events/stream`, { headers: auth });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    await refused.body?.cancel();
    client.close();
    await client.ended;
  });

  it('resumes after Last-Event-ID with only what came since, filtered', async () => {
    const all = await waitForEvents(ns().redis, ns().eventsStream, 2);
    await service.producer.send({ projectId: 'p1', jobId: 'j1', prompt: 'three' });
    await service.producer.send({ projectId: 'p2', jobId: 'j2', prompt: 'four' });
    const after = await waitForEvents(ns().redis, ns().eventsStream, 4);
    // The first test's stream gives its place back once the server saw it leave.
    const client = await eventually(async () => {
      const c = await stream('?project=p2', { 'last-event-id': all[1]?.id ?? '' });
      return c.status === 200 ? c : (c.close(), undefined);
    });
    const [only] = await client.waitFor(1);
    const p2 = after.slice(2).find((e) => e.projectId === 'p2');
    expect(only).toEqual({ id: p2?.id, data: expect.objectContaining({ projectId: 'p2' }) });
    expect(only?.data['dispatchId']).toBe(p2?.dispatchId);
    // Past the p1 event it dropped too, so a reconnect does not read it again.
    await eventually(() => (client.lastEventId() === after[3]?.id ? true : undefined));
    expect(client.messages).toHaveLength(1);
    client.close();
  });

  it('names Last-Event-ID, not after, in the 400 of a bad header', async () => {
    const res = await fetch(`${app.url}/v1/events/stream?after=1-0`, {
      headers: { ...auth, 'last-event-id': '99999999999999999999-0' },
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; code?: string };
    expect(body.error).toMatch(/^Last-Event-ID: /);
    expect(body.code).toBe('invalid_cursor');
  });

  it('ends every open stream when the server shuts down', async () => {
    const server = await startTestServer(ns().config({ EVENTS_TOKEN: TOKEN }));
    const client = await openSse(`${server.url}/v1/events/stream`, auth);
    open.push(client);
    await client.waitFor(4);
    await server.close();
    await client.ended;
    expect(client.messages).toHaveLength(4);
  });
});
