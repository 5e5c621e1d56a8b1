import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AgentApiClient } from '../agent-api/index.js';
import { DispatchStore } from '../store/store.js';
import { watchKeyFile, type Config, type KeyFileWatcher } from '../config/index.js';
import { connect } from '../redis/connections.js';
import { assessor } from '../redis/durability.js';
import { keysFor, QUEUE_NAMES, queueOptions } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { within } from '../time/deadline.js';
import { BEATING_ROLES, startHeartbeat } from '../telemetry/heartbeat.js';
import type { RoleContext, RoleOptions } from './role.js';
import { budgetRate } from '../dispatch/budget.js';

/**
 * How long the store waits for WAITAOF before it gives up (the send is queued again, nothing
 * is woken early). An fsync takes milliseconds; seconds mean a disk in trouble.
 */
export const DURABILITY_TIMEOUT_MS = 5_000;

/** How long closing waits for the agent-API client's requests under way before it goes on. */
const CLIENT_CLOSE_MS = 1_000;

/** What a worker or poller process works with: its context, its connections; `close` releases all. */
export interface RoleResources extends RoleContext {
  /** Commands of the role: the store's scripts and the dispatch queue. */
  readonly redis: Redis;
  /** The connection handed to the role's BullMQ Worker. */
  readonly workerRedis: Redis;
  close(): Promise<void>;
}

/**
 * Opens the connections, the dispatch store, the agent-API client (unless `options.api` is given,
 * which the caller then owns) and the dispatch queue of a role named `name`. The one place a
 * worker or poller is built from the config.
 */
export function openRoleResources(name: string, options: RoleOptions): RoleResources {
  const { config, logger, metrics, api } = options;
  if (!config.redisUrl) throw new Error('REDIS_URL is required');
  const redis = connect(config, 'worker', name);
  redis.on('error', (err) => logger.warn({ err }, LIFECYCLE.redisError));
  // BullMQ closes only the connections it made itself, so this one is closed below.
  const workerRedis = connect(config, 'worker', `${name}-queue`);
  workerRedis.on('error', (err) => logger.debug({ err }, LIFECYCLE.redisError));
  const store = new DispatchStore(redis, keysFor(config.prefix), {
    eventsStream: config.eventsStream,
    eventsMaxLen: config.eventsMaxLen,
    retentionMs: config.dispatchRetentionMs,
    deadLetterRetentionMs: config.deadLetterRetentionMs,
    promptMaxBytes: config.promptMaxBytes,
    pollMaxIntervalMs: config.pollMaxIntervalMs,
    orgRate: config.orgRateLimit && budgetRate(config.orgRateLimit),
    createRate: config.budgetScope === 'split' ? budgetRate(config.createRateLimit) : undefined,
    durability: {
      assessment: assessor(config.redisUrl, config.durability, redis),
      timeoutMs: DURABILITY_TIMEOUT_MS,
    },
  });
  const client =
    api ??
    new AgentApiClient({
      baseUrl: config.agentApiUrl,
      apiKey: config.agentApiKey ?? '',
      connectTimeoutMs: config.connectTimeoutMs,
      requestTimeoutMs: config.sendTimeoutMs,
      logger,
    });
  const queue = new Queue(QUEUE_NAMES.dispatch, {
    connection: redis,
    ...queueOptions(config.prefix),
  });
  queue.on('error', (err) => logger.warn({ err }, LIFECYCLE.redisError));
  const keyFile = watchApiKey(config, client, logger);
  // The alerts' "no worker alive" counts these (see heartbeat.ts); a test's resources beat too.
  const role = BEATING_ROLES.find((beating) => beating === name);
  const heartbeat = role && startHeartbeat(redis, keysFor(config.prefix), role, logger);
  return {
    config,
    logger,
    metrics,
    redis,
    workerRedis,
    store,
    api: client,
    queue,
    refreshKey: () => keyFile?.refresh() ?? false,
    async close() {
      keyFile?.close();
      try {
        await heartbeat?.stop();
        await queue.close().catch(() => {});
        // undici's close waits for requests under way (up to SEND_TIMEOUT): not for long here.
        if (!api)
          await within(
            client.close().catch(() => {}),
            CLIENT_CLOSE_MS,
            () => {},
          );
      } finally {
        redis.disconnect();
        workerRedis.disconnect();
      }
    },
  };
}

/** Keeps `client` on the key of `AGENT_API_KEY_FILE`, when the key comes from a file. */
function watchApiKey(
  config: Config,
  client: AgentApiClient,
  logger: Logger,
): KeyFileWatcher | undefined {
  if (!config.agentApiKeyFile) return undefined;
  return watchKeyFile(config.agentApiKeyFile, config.agentApiKey ?? '', {
    onKey(key) {
      client.setApiKey(key);
      logger.info({}, LIFECYCLE.apiKeyReloaded);
    },
    // The message names AGENT_API_KEY_FILE and why, never the content; the old key stays in use.
    onError: (err) => logger.warn({ err }, LIFECYCLE.apiKeyUnreadable),
  });
}
