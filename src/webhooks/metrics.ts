import type { Redis } from 'ioredis';
import { Counter, Gauge, type Registry } from 'prom-client';
import { webhookPendingKey } from '../redis/keys.js';
import { within } from '../time/deadline.js';
import { WEBHOOK_NAMES } from '../telemetry/names.js';

/**
 * The webhook metrics of a process, on its registry: deliveries by outcome, and the age of the
 * oldest delivery not delivered yet, read from each shard's pending set at scrape time.
 */

/** Outcomes counted: delivered, an attempt failed, dead-lettered, the receiver answered 410. */
export type DeliveryOutcome = 'delivered' | 'failed' | 'dead' | 'gone';

/** What the age gauge reads: a connection and the shard prefixes. */
export interface PendingSource {
  readonly redis: Redis;
  readonly shardPrefixes: readonly string[];
}

/** The webhook metrics of one registry. */
export interface WebhookMetrics {
  readonly deliveries: Counter<'outcome'>;
  /** The gauge reads `source` from now on (the latest deliverer of the process). */
  watch(source: PendingSource | undefined): void;
}

/** Longest a scrape waits for the pending sets: a Redis outage must not hang /metrics. */
const SCRAPE_TIMEOUT_MS = 1_000;

const byRegistry = new WeakMap<Registry, WebhookMetrics>();

/** The webhook metrics of `registry`, registered once however many deliverers use it. */
export function webhookMetrics(registry: Registry): WebhookMetrics {
  const known = byRegistry.get(registry);
  if (known) return known;
  let source: PendingSource | undefined;
  const deliveries = new Counter({
    name: WEBHOOK_NAMES.deliveriesMetric,
    help: 'Webhook deliveries by outcome: delivered, failed (one attempt), dead, gone (410).',
    labelNames: ['outcome'],
    registers: [registry],
  });
  new Gauge({
    name: WEBHOOK_NAMES.oldestMetric,
    help: 'Age of the oldest webhook delivery not delivered yet, in seconds (0: none).',
    registers: [registry],
    async collect() {
      if (!source) return;
      const oldest = await oldestPending(source).catch(() => undefined);
      if (oldest !== undefined) this.set(oldest === null ? 0 : (Date.now() - oldest) / 1000);
    },
  });
  const metrics: WebhookMetrics = { deliveries, watch: (next) => void (source = next) };
  byRegistry.set(registry, metrics);
  return metrics;
}

/** The queue time of the oldest pending delivery of every shard; `null` when there is none. */
async function oldestPending(source: PendingSource): Promise<number | null> {
  const reads = Promise.all(
    source.shardPrefixes.map((prefix) =>
      source.redis.zrange(webhookPendingKey(prefix), 0, 0, 'WITHSCORES'),
    ),
  );
  const replies = await within(reads, SCRAPE_TIMEOUT_MS, () => {
    throw new Error('the pending sets did not answer in time');
  });
  const scores = replies.flatMap((reply) => (reply[1] === undefined ? [] : [Number(reply[1])]));
  return scores.length === 0 ? null : Math.min(...scores);
}
