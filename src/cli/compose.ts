import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { loadConfig, type Config, type SettingName } from '../config/index.js';
import { startHttpServer, type HttpServer, type SendPauseCheck } from '../http/index.js';
import { createProducer, type Producer } from '../producer/index.js';
import { connect } from '../redis/connections.js';
import { keysFor, QUEUE_NAMES, queueOptions, type ShardView } from '../redis/keys.js';
import { closeInOrder, type Role } from '../runtime/role.js';
import { servedShards, shardsOf } from '../runtime/shards.js';
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
    // Unset, the fleet's recorded count (see `fleetShardCount`).
    ...(config.shardCountSet ? { shards: config.shardCount } : {}),
    cluster: config.redisCluster,
    promptMaxBytes: config.promptMaxBytes,
    sendAttempts: config.sendAttempts,
    durability: config.durability,
    eventsStream: config.eventsStream,
    eventsMaxLen: config.eventsMaxLen,
    dispatchRetentionMs: config.dispatchRetentionMs,
    projectBacklogMax: config.projectBacklogMax,
    sendRateLimit: config.sendRateLimit,
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
  /** The process sends: `/readyz` reports these roles and the send pause of its shards. */
  readonly roles?: readonly Role[];
}

/** A started HTTP server and what it was built with; `close` stops all of it (a {@link Role}). */
export interface Serving extends Role {
  readonly server: HttpServer;
  readonly redis: Redis;
  /** Every shard of the deployment, with its queues when the dashboard is on. */
  readonly shards: readonly ShardView[];
  readonly producer: Producer | undefined;
}

/**
 * Starts the HTTP server of a process with its own Redis connection (a cluster's, on a cluster),
 * every shard's queues and its producer. The dashboard and the gauges show every shard; `/readyz`
 * reports the send pause of each shard the process serves (`SHARDS`).
 */
export async function startServing(kit: RoleKit, options: ServingOptions): Promise<Serving> {
  const { config, logger, metrics } = kit;
  const redis = connect(config, 'worker', options.name);
  const logRedisError = redisErrorLog(logger, redis);
  redis.on('error', (err: Error) => logRedisError(err, {}));
  const shards = shardsOf(config).map((shard): ShardView => {
    const queues = options.dashboard
      ? Object.values(QUEUE_NAMES).map((name) => {
          const queue = new Queue(name, { connection: redis, ...queueOptions(shard.prefix) });
          queue.on('error', (err: Error) =>
            logRedisError(err, { queue: name, shard: shard.index }),
          );
          return queue;
        })
      : [];
    return {
      index: shard.index,
      name: `shard ${shard.index}`,
      keys: keysFor(shard.prefix),
      queues,
    };
  });
  const queues = shards.flatMap((shard) => shard.queues);
  const producer = options.intake ? producerFor(config) : undefined;
  metrics.watchRedis({ shards, redis, logger });
  const roles = options.roles;
  const close = async () => {
    await closeInOrder(logger, config.shutdownTimeoutMs, [
      ['http', () => server?.close() ?? Promise.resolve()],
      ['producer', () => producer?.close() ?? Promise.resolve()],
      ...queues.map((queue) => [`queue:${queue.qualifiedName}`, () => queue.close()] as const),
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
      shards,
      producer,
      roles: () => (roles ?? []).map((r) => ({ name: r.name, running: r.running() })),
      sendPauses: roles ? sendPausesOf(config, shards) : undefined,
    });
  } catch (err) {
    await close();
    throw err;
  }
  return { name: 'http', running: () => true, close, server, redis, shards, producer };
}

/**
 * The send pause of each shard the process serves, as `/readyz` checks it: `auth` with one shard,
 * `auth:shard 3` for each served shard otherwise.
 */
function sendPausesOf(config: Config, shards: readonly ShardView[]): SendPauseCheck[] {
  const served = new Set(servedShards(config).map((shard) => shard.index));
  const many = config.shardCount > 1;
  return shards
    .filter((shard) => served.has(shard.index))
    .map((shard) => ({
      check: many ? `auth:${shard.name}` : 'auth',
      key: shard.keys.authPause,
    }));
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
