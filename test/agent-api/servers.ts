import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import {
  createServer as createNetServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import { inspect } from 'node:util';
import { expect } from 'vitest';
import {
  AgentApiClient,
  AgentApiError,
  type AgentApiClientOptions,
} from '../../src/agent-api/index.js';
import { TEST_API_KEY } from '../support/simulator.js';

/**
 * Tiny real servers for the socket-level cases the simulator does not cover (403, HTML 503,
 * a FIN after the request, a TLS handshake that never ends), plus assertions shared by the
 * client tests.
 */

/** A listening server on a loopback port; `close()` destroys its sockets first. */
export interface TestServer {
  readonly url: string;
  readonly port: number;
  /** Sockets accepted so far. */
  readonly connections: () => number;
  close(): Promise<void>;
}

/** An HTTP server whose handler receives the request with its body already read. */
export async function httpServer(
  handler: (req: IncomingMessage, res: ServerResponse, body: string) => void,
): Promise<TestServer> {
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => handler(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  return listen(server, () => server.closeAllConnections());
}

/** A raw TCP server: `onSocket` decides what the "HTTP server" does with the bytes. */
export async function netServer(onSocket: (socket: Socket) => void): Promise<TestServer> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    onSocket(socket);
  });
  return listen(server, () => {
    for (const socket of sockets) socket.destroy();
  });
}

async function listen(server: Server, destroyAll: () => void): Promise<TestServer> {
  let connections = 0;
  server.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    connections: () => connections,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        destroyAll();
      }),
  };
}

/** A loopback port with nothing listening: connecting to it is refused. */
export async function refusedPort(): Promise<number> {
  const server = await netServer(() => {});
  await server.close();
  return server.port;
}

/** A client with the test key and short timeouts; `overrides` win. */
export function testClient(
  baseUrl: string,
  overrides: Partial<AgentApiClientOptions> = {},
): AgentApiClient {
  return new AgentApiClient({
    baseUrl,
    apiKey: TEST_API_KEY,
    connectTimeoutMs: 1_000,
    requestTimeoutMs: 1_000,
    ...overrides,
  });
}

/** Awaits a call that must fail; returns its {@link AgentApiError} after checking it keeps the key secret. */
export async function failure(call: Promise<unknown>): Promise<AgentApiError> {
  const err = await call.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
  expect(err).toBeInstanceOf(AgentApiError);
  expectNoKey(err);
  return err as AgentApiError;
}

/** The API key appears nowhere in the error: not its message, not `util.inspect`, not its cause. */
export function expectNoKey(err: unknown): void {
  const text = inspect(err, { depth: 10, showHidden: true });
  expect(text).not.toContain(TEST_API_KEY);
  expect(String(err)).not.toContain(TEST_API_KEY);
}
