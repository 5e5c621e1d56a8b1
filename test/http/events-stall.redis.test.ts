import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, useNamespace } from '../support/namespace.js';
import { expectNoLeakedHandles, startTestServer, type TestServer } from './fixture.js';

/**
 * A client of `/v1/events/stream` must not keep its place under the cap for ever: not when it
 * stops reading (the server cuts it off once its writes have waited `stallMs` for the socket to
 * drain), nor when it left before its stream opened.
 */

const TOKEN = 'events-secret-token';
const auth = { authorization: `Bearer ${TOKEN}` };

afterAll(() => expectNoLeakedHandles());

describe('GET /v1/events/stream with a client that reads nothing', () => {
  const ns = useNamespace('http-events-stall', { scope: 'all' });
  let app: TestServer;
  beforeAll(async () => {
    app = await startTestServer(ns().config({ EVENTS_TOKEN: TOKEN }), {
      events: { maxStreams: 1, stallMs: 300, heartbeatMs: 100 },
    });
  });
  afterAll(() => app?.close());

  it('cuts it off, so that its place under the cap goes to the next client', async () => {
    // About 16 MB of events: more than the socket buffers between server and client hold.
    const padding = JSON.stringify({ meta: 'x'.repeat(8_000) });
    const pipeline = ns().redis.pipeline();
    for (let k = 0; k < 2_000; k++)
      pipeline.xadd(ns().eventsStream, '*', 'type', 'followup.completed', 'event', padding);
    await pipeline.exec();

    const stalled = await openUnread(new URL(app.url));
    try {
      const next = await eventually(
        async () => {
          const res = await fetch(`${app.url}/v1/events/stream`, { headers: auth });
          if (res.status === 200) return res;
          await res.body?.cancel();
          return undefined;
        },
        { timeoutMs: 20_000, what: 'the stalled stream to give its place back' },
      );
      expect(next.headers.get('content-type')).toMatch(/^text\/event-stream/);
      await next.body?.cancel();
    } finally {
      stalled.destroy();
    }
  });
});

describe('GET /v1/events/stream with a client that leaves at once', () => {
  const ns = useNamespace('http-events-leave', { scope: 'all' });
  let app: TestServer;
  beforeAll(async () => {
    app = await startTestServer(ns().config({ EVENTS_TOKEN: TOKEN }), {
      events: { maxStreams: 1 },
    });
  });
  afterAll(() => app?.close());

  it('opens no stream for a client that left while its request was being checked', async () => {
    // Redis holds the first request's check of the layout while the client leaves; with no
    // event to write, nothing else would notice that it left.
    await ns().redis.client('PAUSE', 1_000, 'ALL');
    const controller = new AbortController();
    const leaving = fetch(`${app.url}/v1/events/stream`, {
      headers: auth,
      signal: controller.signal,
    }).catch(() => undefined);
    setTimeout(() => controller.abort(), 200);
    await leaving;
    const next = await eventually(
      async () => {
        const res = await fetch(`${app.url}/v1/events/stream`, { headers: auth });
        await res.body?.cancel();
        return res.status === 200 ? res : undefined;
      },
      { timeoutMs: 10_000, what: 'the place of the client that left' },
    );
    expect(next.status).toBe(200);
  });
});

/** Opens the stream on a raw socket that never reads once its request is sent. */
async function openUnread(url: URL): Promise<Socket> {
  const socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve).once('error', reject);
  });
  socket.on('error', () => {});
  socket.write(
    `GET /v1/events/stream HTTP/1.1\r\nHost: ${url.host}\r\n` +
      `Authorization: ${auth.authorization}\r\n\r\n`,
  );
  // Paused, the socket stops reading from the kernel: its buffers, then the server's, fill up.
  socket.pause();
  return socket;
}
