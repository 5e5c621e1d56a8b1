import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import type { Config, SettingName } from '../../src/config/index.js';
import type { EventFeedOptions } from '../../src/http/event-feed.js';
import { startHttpServer, type HttpServer } from '../../src/http/index.js';
import { createProducer, type Producer } from '../../src/producer/index.js';
import { connect } from '../../src/redis/connections.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { createLogger, type Logger } from '../../src/telemetry/logger.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import { useNamespace, type Namespace } from '../support/namespace.js';

/** An HTTP server wired the way `serve` wires it, on a free port, for one test namespace. */
export interface TestServer {
  readonly server: HttpServer;
  readonly url: string;
  readonly redis: Redis;
  readonly queues: Queue[];
  readonly metrics: Metrics;
  readonly producer: Producer | undefined;
  /** Closes the server, producer, queues and connection, in that order. */
  close(): Promise<void>;
}

/** Options of {@link startTestServer}. */
export interface TestServerOptions {
  /** Redis to use instead of `config.redisUrl` (a private redis-server, say). */
  redisUrl?: string;
  /** Starts a producer for the intake. */
  withProducer?: boolean;
  /** A producer of the test's own for the intake (closed by `close`), instead of a real one. */
  producer?: Producer;
  roles?: () => readonly { name: string; running: boolean }[];
  /** Where the server logs (the fault suite reads its lines). @defaultValue a silent logger */
  logger?: Logger;
  /** The event streams' cap, heartbeat and poll period. */
  events?: EventFeedOptions;
}

/** Starts the server on a free loopback port. */
export async function startTestServer(
  config: Config,
  options: TestServerOptions = {},
): Promise<TestServer> {
  const redisUrl = options.redisUrl ?? config.redisUrl ?? '';
  const logger = options.logger ?? createLogger('silent');
  const metrics = createMetrics({ logger });
  const redis = connect(redisUrl, 'worker', 'test-http');
  redis.on('error', () => {});
  const queues = Object.values(QUEUE_NAMES).map((name) => {
    const queue = new Queue(name, { connection: redis, prefix: config.prefix });
    queue.on('error', () => {});
    return queue;
  });
  const producer = options.producer
    ? options.producer
    : options.withProducer
      ? createProducer({ redisUrl, prefix: config.prefix, promptMaxBytes: config.promptMaxBytes })
      : undefined;
  const shards = [{ index: 0, name: 'shard 0', keys: keysFor(config.prefix), queues }];
  metrics.watchRedis({ shards, redis });
  const server = await startHttpServer({
    config: { ...config, httpPort: 0 },
    logger,
    metrics,
    redis,
    shards,
    producer,
    roles: options.roles ?? (() => []),
    ...(options.events ? { events: options.events } : {}),
  });
  return {
    server,
    url: server.url,
    redis,
    queues,
    metrics,
    producer,
    async close() {
      await server.close();
      await producer?.close();
      for (const queue of queues) await queue.close();
      redis.disconnect();
    },
  };
}

/** The namespace and server of one describe block; read them inside hooks and tests. */
export interface ServedNamespace {
  readonly ns: Namespace;
  readonly app: TestServer;
}

/**
 * Gives the calling describe block a namespace labelled `label` and a test server configured with
 * `settings`: started before its first test (before any `beforeAll` registered after this call),
 * closed and cleaned after its last.
 */
export function useTestServer(
  label: string,
  settings: Partial<Record<SettingName, string>> = {},
  options: () => TestServerOptions = () => ({}),
): ServedNamespace {
  const ns = useNamespace(label, { scope: 'all' });
  let app: TestServer | undefined;
  beforeAll(async () => {
    app = await startTestServer(ns().config(settings), options());
  });
  afterAll(async () => {
    await app?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error(`useTestServer('${label}'): read before it started`);
    return value;
  };
  return {
    get ns() {
      return ns();
    },
    get app() {
      return started(app);
    },
  };
}

/**
 * A call to the server of `served` with a bearer token (`defaultToken` unless the call names
 * another) and, when it has one, a JSON body. Reads the server at call time, once it has started.
 */
export function bearerCall(
  served: ServedNamespace,
  defaultToken: string,
): (method: string, path: string, body?: unknown, token?: string) => Promise<Response> {
  return (method, path, body, token = defaultToken) =>
    fetch(`${served.app.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
}

/** Handle types that mean a test left a socket, server or child process open. */
const LEAKS = ['TCPSocketWrap', 'TCPServerWrap', 'TCPWrap', 'ProcessWrap'];

/**
 * Fails unless every socket, server and child process the test file opened has closed. Closing is
 * asynchronous, so it polls briefly before failing.
 */
export async function expectNoLeakedHandles(timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = process.getActiveResourcesInfo().filter((type) => LEAKS.includes(type));
    if (open.length === 0) return;
    if (Date.now() > deadline) throw new Error(`leaked handles: ${open.join(', ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
