import { afterEach, describe, expect, it } from 'vitest';
import type { AgentApiClient } from '../../src/agent-api/index.js';
import { eventually } from '../support/namespace.js';
import { startTestSimulator } from '../support/simulator.js';
import {
  failure,
  httpServer,
  netServer,
  refusedPort,
  testClient,
  type TestServer,
} from './servers.js';

/**
 * Transport failures over real sockets, and the one question that matters for a send: may the
 * request have reached the server? Failures before undici wrote the request are not ambiguous;
 * failures after it are.
 */

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function track<T extends TestServer | AgentApiClient>(value: T): T {
  cleanups.push(() => value.close());
  return value;
}

describe('after the request was written: ambiguous', () => {
  it('times out when the simulator processed the send but never answered', async () => {
    const sim = await startTestSimulator({ faults: { timeoutRate: 1 } });
    cleanups.push(() => sim.close());
    sim.seedJob('p', 'j');
    const client = track(testClient(sim.url, { requestTimeoutMs: 300 }));
    const err = await failure(client.sendMessage('p', 'j', 'hello'));
    expect(err).toMatchObject({ code: 'timeout', ambiguous: true, httpStatus: undefined });
    expect(err.cause).toMatchObject({ code: 'UND_ERR_HEADERS_TIMEOUT' });
    expect(sim.deliveries.map((d) => d.prompt)).toEqual(['hello']);
  });

  it('reports a reset after the simulator processed the send', async () => {
    const sim = await startTestSimulator({ faults: { resetRate: 1 } });
    cleanups.push(() => sim.close());
    sim.seedJob('p', 'j');
    const client = track(testClient(sim.url));
    const err = await failure(client.sendMessage('p', 'j', 'hello'));
    expect(err).toMatchObject({ code: 'network', ambiguous: true, httpStatus: undefined });
    expect(err.cause).toMatchObject({
      code: expect.stringMatching(/^(ECONNRESET|UND_ERR_SOCKET)$/),
    });
    expect(sim.requests[0]).toMatchObject({ processed: true, status: 0, fault: 'reset' });
  });

  it('reports "other side closed" when the server reads the request and closes', async () => {
    const server = track(
      await netServer((socket) => {
        socket.once('data', () => socket.end());
      }),
    );
    const client = track(testClient(server.url));
    const err = await failure(client.sendMessage('p', 'j', 'hello'));
    expect(err).toMatchObject({ code: 'network', ambiguous: true });
    expect(err.cause).toMatchObject({ code: 'UND_ERR_SOCKET' });
  });

  it('reports a caller abort after the request was written as an ambiguous timeout', async () => {
    let received = 0;
    const server = track(await httpServer(() => (received += 1)));
    const client = track(testClient(server.url, { requestTimeoutMs: 10_000 }));
    const controller = new AbortController();
    const call = failure(client.sendMessage('p', 'j', 'hello', { signal: controller.signal }));
    await eventually(() => (received === 1 ? true : undefined), {
      what: 'the request at the server',
    });
    controller.abort();
    expect(await call).toMatchObject({ code: 'timeout', ambiguous: true });
  });
});

describe('before the request was written: not ambiguous', () => {
  it('reports connection refused', async () => {
    const client = track(testClient(`http://127.0.0.1:${await refusedPort()}`));
    const err = await failure(client.sendMessage('p', 'j', 'hello'));
    expect(err).toMatchObject({ code: 'network', ambiguous: false, httpStatus: undefined });
    expect(err.cause).toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('reports a DNS failure for a .invalid host', async () => {
    const client = track(testClient('http://agent-api.invalid'));
    const err = await failure(client.sendMessage('p', 'j', 'hello'));
    expect(err).toMatchObject({ code: 'network', ambiguous: false });
    expect(err.cause).toMatchObject({ code: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN)$/) });
  });

  it('reports a connect timeout when the TLS handshake never completes', async () => {
    let bytes = 0;
    const server = track(
      await netServer((socket) => socket.on('data', (chunk: Buffer) => (bytes += chunk.length))),
    );
    const client = track(testClient(`https://127.0.0.1:${server.port}`, { connectTimeoutMs: 200 }));
    const err = await failure(client.sendMessage('p', 'j', 'hello'));
    expect(err).toMatchObject({ code: 'network', ambiguous: false });
    expect(err.cause).toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT' });
    expect(server.connections()).toBeGreaterThan(0);
    expect(bytes).toBeGreaterThan(0); // a ClientHello, never an HTTP request
  });

  it('reports an already-aborted signal without touching the network', async () => {
    const server = track(await httpServer(() => {}));
    const client = track(testClient(server.url));
    const err = await failure(
      client.sendMessage('p', 'j', 'hello', { signal: AbortSignal.abort() }),
    );
    expect(err).toMatchObject({ code: 'timeout', ambiguous: false });
    expect(server.connections()).toBe(0);
  });

  it('answers a caller abort at once while the request waits for a socket, and never writes it', async () => {
    const received: string[] = [];
    const server = track(await httpServer((req) => received.push(req.url ?? '')));
    const client = testClient(server.url, { connections: 1, requestTimeoutMs: 500 });
    const first = failure(client.getJob('p', 'first'));
    await eventually(() => (received.length === 1 ? true : undefined), {
      what: 'the first request',
    });
    const controller = new AbortController();
    const second = failure(
      client.sendMessage('p', 'second', 'hello', { signal: controller.signal }),
    );
    controller.abort();
    expect(await second).toMatchObject({ code: 'timeout', ambiguous: false });
    expect(await first).toMatchObject({ code: 'timeout', ambiguous: true });
    // close() waits until undici dispatched the queued request, which onRequestStart aborts unwritten.
    await client.close();
    expect(received).toEqual(['/v2/agent/p/job/first']);
  });

  it('fails calls after close() without a request', async () => {
    const server = track(await httpServer(() => {}));
    const client = testClient(server.url);
    await client.close();
    await expect(client.close()).resolves.toBeUndefined();
    const err = await failure(client.getJob('p', 'j'));
    expect(err).toMatchObject({ code: 'network', ambiguous: false });
    expect(server.connections()).toBe(0);
  });
});
