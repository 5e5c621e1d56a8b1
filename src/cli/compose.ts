import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { loadConfig, type Config, type SettingName } from '../config/index.js';
import { startHttpServer, type HttpServer } from '../http/index.js';
import { createProducer, type Producer } from '../producer/index.js';
import { connect } from '../redis/connections.js';
import { keysFor, QUEUE_NAMES, queueOptions, type Keys } from '../redis/keys.js';
import { closeInOrder, type Role } from '../runtime/role.js';
import { shardsOf } from '../runtime/shards.js';
import { createLogger, logFormatFor, type Logger } from '../telemetry/logger.js';
import { createMetrics, type Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { startTracing } from '../telemetry/tracing-sdk.js';
import type { Command, CommandContext } from './command.js';

/**
 * The one place a command's process is built from the config: the config itself (environment
 * and flags), the logger and metrics its roles share, the producer, and the HTTP server with its
 * Redis connection and the dashboard's queues. Worker and poller build their own connections and
 * store (`openRoleResources` in src/runtime).
 */

/**
 * Loads the config of a command: the environment, overridden by the command's flags that name a
 * setting, with the command's required settings enforced. Throws `ConfigError` (exit 2). Starts
 * the process's tracing when `OTEL_TRACES_EXPORTER` asks for it (the CLI stops it at the exit).
 */
export async function configOf(command: Command, ctx: CommandContext): Promise<Config> {
  const overrides: Partial<Record<SettingName, string>> = {};
  for (const [name, option] of Object.entries(command.options)) {
    const value = ctx.values[name];
    if (option.setting && typeof value === 'string') overrides[option.setting] = value;
  }
  const config = loadConfig(ctx.env, overrides, { required: command.requires ?? [] });
  await startTracing(config.tracesExporters, command.name);
  return config;
}

/** What the roles of one process share. */
export interface RoleKit {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/** Builds the logger and metrics of a role process; `pretty` for `start`, run by a person. */
export function roleKit(config: Config, pretty = false): RoleKit {
  const logger = createLogger(config.logLevel, undefined, logFormatFor(config.logFormat, pretty));
  if (config.tracesExporters.length > 0)
    logger.info({ exporters: config.tracesExporters }, LIFECYCLE.tracingStarted);
  return { config, logger, metrics: createMetrics({ logger }) };
}

/**
 * The producer of a process, with the config's prefix, prompt limit, send attempts, events stream,
 * shards and `REDIS_DURABILITY`.
 */
export function producerFor(config: Config): Producer {
  return createProducer({
    redisUrl: config.redisUrl ?? '',
    prefix: config.prefix,
    shards: config.shardCount,
    cluster: config.redisCluster,
    promptMaxBytes: config.promptMaxBytes,
    sendAttempts: config.sendAttempts,
    durability: config.durability,
    eventsStream: config.eventsStream,
    eventsMaxLen: config.eventsMaxLen,
    dispatchRetentionMs: config.dispatchRetentionMs,
  });
}

/** What a process's HTTP server shows. */
export interface ServingOptions {
  /** Names the Redis connection. */
  readonly name: string;
  /** Shows every queue on the dashboard (and to the queue gauges). */
  readonly dashboard: boolean;
  /** Serves the intake (`POST /v1/followups`) with its own producer. */
  readonly intake: boolean;
  /** The process sends: `/readyz` reports the fleet-wide send pause and these roles. */
  readonly roles?: readonly Role[];
}

/** A started HTTP server and what it was built with; `close` stops all of it (a {@link Role}). */
export interface Serving extends Role {
  readonly server: HttpServer;
  readonly redis: Redis;
  readonly queues: readonly Queue[];
  readonly producer: Producer | undefined;
  readonly keys: Keys;
}

/** Starts the HTTP server of a process with its own Redis connection, queues and producer. */
export async function startServing(kit: RoleKit, options: ServingOptions): Promise<Serving> {
  const { config, logger, metrics } = kit;
  const redis = connect(config, 'worker', options.name);
  // The dashboard, the gauges and /readyz's pause read the first shard (README, known issues).
  const [first] = shardsOf(config);
  const prefix = first?.prefix ?? config.prefix;
  const logRedisError = redisErrorLog(logger, redis);
  redis.on('error', (err: Error) => logRedisError(err, {}));
  const queues = options.dashboard
    ? Object.values(QUEUE_NAMES).map((name) => {
        const queue = new Queue(name, { connection: redis, ...queueOptions(prefix) });
        queue.on('error', (err: Error) => logRedisError(err, { queue: name }));
        return queue;
      })
    : [];
  const producer = options.intake ? producerFor(config) : undefined;
  const keys = keysFor(prefix);
  metrics.watchRedis({ queues, redis, keys, logger });
  const roles = options.roles;
  const close = async () => {
    await closeInOrder(logger, config.shutdownTimeoutMs, [
      ['http', () => server?.close() ?? Promise.resolve()],
      ['producer', () => producer?.close() ?? Promise.resolve()],
      ...queues.map((queue) => [`queue:${queue.name}`, () => queue.close()] as const),
    ]);
    redis.disconnect();
  };
  let server: HttpServer | undefined;
  try {
    server = await startHttpServer({
      config,
      logger,
      metrics,
      redis,
      queues,
      producer,
      roles: () => (roles ?? []).map((r) => ({ name: r.name, running: r.running() })),
      authPauseKey: roles ? keys.authPause : undefined,
    });
  } catch (err) {
    await close();
    throw err;
  }
  return { name: 'http', running: () => true, close, server, redis, queues, producer, keys };
}

/**
 * Logs the first Redis error of an outage at warn and the rest at debug: the queues share the
 * connection and repeat its errors, and a reconnect loop would log them every 2 s.
 */
function redisErrorLog(logger: Logger, redis: Redis): (err: Error, fields: object) => void {
  let reported = false;
  redis.on('ready', () => {
    if (reported) logger.info({}, LIFECYCLE.redisReady);
    reported = false;
  });
  return (err, fields) => {
    logger[reported ? 'debug' : 'warn']({ err, ...fields }, LIFECYCLE.redisError);
    reported = true;
  };
}
