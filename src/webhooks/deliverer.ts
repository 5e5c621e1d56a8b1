import type { Redis } from 'ioredis';
import type { Agent } from 'undici';
import type { Config } from '../config/index.js';
import type { Logger } from '../telemetry/logger.js';
import type { WebhookMetrics } from './metrics.js';
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
  return {
    get() {
      if (!cached || Date.now() - cached.at > CACHE_MS) {
        const value = store.all();
        cached = { at: Date.now(), value };
        value.catch(() => (cached = undefined));
      }
      return cached.value;
    },
    async disable(subscription) {
      await store.disable(subscription, Date.now());
      cached = undefined;
    },
  };
}
