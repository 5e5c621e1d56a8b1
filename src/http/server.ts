import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import { adminFor, type Admin, type Producer } from '../producer/index.js';
import { duplicate } from '../redis/connections.js';
import type { ShardView } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { shardsOf } from '../runtime/shards.js';
import { createApp } from './app.js';
import { createEventFeed, type EventFeedOptions } from './event-feed.js';
import { READY_PING_TIMEOUT_MS, type SendPauseCheck } from './health.js';
import { LIFECYCLE } from '../telemetry/names.js';

/** What {@link startHttpServer} serves. */
export interface HttpServerOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** Redis of the process; `/readyz` PINGs through a fail-fast duplicate of it. */
  redis: Redis;
  /** Every shard of the deployment, with the queues the dashboard shows. */
  shards: readonly ShardView[];
  /** The intake; when absent, or `INTAKE_TOKEN` is unset, `/v1/followups` answers 404. */
  producer?: Producer;
  /** The operator controls; by default built on `redis` from the config. */
  admin?: Admin;
  /** The roles of this process, for `/readyz`. */
  roles: () => readonly { name: string; running: boolean }[];
  /**
   * In a process that sends: the send pause of each shard it serves, so `/readyz` reports them
   * (`auth` checks). Left out by `serve`, whose intake keeps taking follow-ups meanwhile.
   */
  sendPauses?: readonly SendPauseCheck[] | undefined;
  /** Interface to listen on. @defaultValue `config.httpHost` (`HTTP_HOST`, `127.0.0.1`) */
  host?: string;
  /** The event streams' cap, heartbeat and poll period (tests shorten them). */
  events?: EventFeedOptions;
}

/** A listening HTTP server. */
export interface HttpServer {
  /** Base URL to reach it (loopback when it listens on every interface). */
  readonly url: string;
  readonly port: number;
  /** The express app it serves (tests walk its routes). */
  readonly app: Express;
  /** Stops accepting, lets requests in flight finish briefly, closes keep-alive sockets. Idempotent. */
  close(): Promise<void>;
}

/** Longest wait for requests in flight when closing; keep-alive sockets are closed at once. */
const CLOSE_GRACE_MS = 5_000;

/**
 * Starts the HTTP server on `config.httpPort` (0 picks a free port): dashboard, metrics, health and
 * intake. Rejects when the port cannot be bound.
 */
export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const { config, logger } = options;
  const readinessRedis = duplicate(options.redis, {
    connectionName: 'agent-dispatch:readyz',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: READY_PING_TIMEOUT_MS,
  });
  // /readyz reports Redis outages; the same error in the log every reconnect would only be noise.
  readinessRedis.on('error', (err: Error) => logger.debug({ err }, LIFECYCLE.redisError));
  const admin = options.admin ?? adminFor(config, options.redis);
  // Its own connection only where the events API is on.
  const events = config.tokens.events.length > 0 ? eventFeedOf(options) : undefined;
  const app = createApp({ ...options, readinessRedis, producer: options.producer, admin, events });
  const server = createServer(app);
  try {
    await listen(server, config.httpPort, options.host ?? config.httpHost);
  } catch (err) {
    readinessRedis.disconnect();
    await events?.close().finally(() => events.redis.disconnect());
    if (!options.admin) await admin.close();
    throw err;
  }
  const address = server.address() as AddressInfo;
  const host = ['0.0.0.0', '::'].includes(address.address) ? '127.0.0.1' : address.address;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`,
    port: address.port,
    app,
    close() {
      // The event streams end first: they never end by themselves, so the server would wait.
      closing ??= Promise.resolve(events?.close())
        .then(() => closeServer(server, Math.min(CLOSE_GRACE_MS, config.shutdownTimeoutMs)))
        .finally(async () => {
          readinessRedis.disconnect();
          events?.redis.disconnect();
          if (!options.admin) await admin.close();
        });
      return closing;
    },
  };
}

/** The feed of the event routes, on a connection of its own: a page's reads queue behind nothing. */
function eventFeedOf(options: HttpServerOptions) {
  const redis = duplicate(options.redis, { connectionName: 'agent-dispatch:events-http' });
  redis.on('error', (err: Error) => options.logger.debug({ err }, LIFECYCLE.redisError));
  const streams = shardsOf(options.config).map((s) => s.eventsStream);
  const { prefix } = options.config;
  return createEventFeed(redis, streams, options.logger, { ...options.events, prefix });
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Closes the server: idle sockets now, busy ones once their request ends or `graceMs` passes. */
function closeServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    force.unref();
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
