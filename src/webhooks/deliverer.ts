import type { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import type { Agent } from 'undici';
import type { Config } from '../config/index.js';
import { connect } from '../redis/connections.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { webhookDispatcher } from './attempt.js';
import { webhookMetrics, type WebhookMetrics } from './metrics.js';
import { SubscriptionStore, type Subscription } from './subscriptions.js';

/** What the deliverer's Workers share in a process. */
export interface Deliverer {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
  readonly redis: Redis;
  readonly subscriptions: CachedSubscriptions;
  /** The process's one undici dispatcher for webhooks. */
  readonly dispatcher: Agent;
}

/** The subscriptions, read from Redis at most once per {@link CACHE_MS}. */
export interface CachedSubscriptions {
  get(): Promise<Subscription[]>;
  /**
   * The subscription `id`, read from Redis again when the cache lacks it: another process may
   * have queued a delivery for a subscription added after this cache was read.
   */
  find(id: string): Promise<Subscription | undefined>;
  /** Disables one (its receiver answered 410) and forgets the cache. */
  disable(subscription: Subscription): Promise<void>;
}

/**
 * How long the subscriptions are cached: an added, removed or disabled subscription is seen by
 * every deliverer within this.
 */
const CACHE_MS = 1_000;

/** The subscriptions of `config`'s deployment, cached. */
export function cachedSubscriptions(redis: Redis, config: Config): CachedSubscriptions {
  const store = new SubscriptionStore(redis, config);
  let cached: { at: number; value: Promise<Subscription[]> } | undefined;
  const get = (fresh = false) => {
    if (fresh || !cached || Date.now() - cached.at > CACHE_MS) {
      const value = store.all();
      cached = { at: Date.now(), value };
      value.catch(() => (cached = undefined));
    }
    return cached.value;
  };
  return {
    get: () => get(),
    async find(id) {
      const known = (await get()).find((s) => s.id === id);
      return known ?? (await get(true)).find((s) => s.id === id);
    },
    async disable(subscription) {
      await store.disable(subscription, Date.now());
      cached = undefined;
    },
  };
}

/** A {@link Deliverer} with the connection of its BullMQ Workers; `close` releases all. */
export interface OpenDeliverer extends Deliverer {
  readonly workerRedis: Redis;
  close(): Promise<void>;
}

/**
 * Opens what a process's deliverer shares: its two connections (commands; its Workers'), the
 * cached subscriptions, the metrics of `registry`, and the one undici dispatcher.
 */
export function openDeliverer(config: Config, logger: Logger, registry: Registry): OpenDeliverer {
  const redis = connect(config, 'worker', 'webhooks');
  redis.on('error', (err) => logger.warn({ err }, LIFECYCLE.redisError));
  const workerRedis = connect(config, 'worker', 'webhooks-queue');
  workerRedis.on('error', (err) => logger.debug({ err }, LIFECYCLE.redisError));
  const metrics = webhookMetrics(registry);
  const dispatcher = webhookDispatcher(config.webhookTimeoutMs);
  return {
    config,
    logger,
    metrics,
    redis,
    workerRedis,
    subscriptions: cachedSubscriptions(redis, config),
    dispatcher,
    async close() {
      metrics.watch(undefined);
      try {
        await dispatcher.close();
      } finally {
        redis.disconnect();
        workerRedis.disconnect();
      }
    },
  };
}
