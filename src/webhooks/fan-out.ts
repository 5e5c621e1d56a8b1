import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { WEBHOOK_GROUP } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import { WEBHOOK_NAMES } from '../telemetry/names.js';
import { addDeliveries, type NewDelivery } from './deliveries.js';
import { webhookEventOf } from './events.js';
import { wants, type Subscription } from './subscriptions.js';

/**
 * The fan-out: every deliverer reads each shard's completion events with one consumer group
 * (`WEBHOOK_GROUP`), so each event is taken by one deliverer, and turns it into a delivery job per
 * subscription that wants it before it acknowledges it (XACK). A deliverer that dies in between
 * leaves its events pending in the group: another one claims them (XAUTOCLAIM) once they have been
 * idle for `claimIdleMs`, and adds their jobs again, which adds nothing for the jobs already
 * there (their ids are the webhook ids). The send path is not touched: this only reads the stream.
 */

/** One shard as the fan-out sees it. */
export interface FanOutShard {
  readonly prefix: string;
  readonly eventsStream: string;
  /** The shard's delivery queue. */
  readonly queue: Queue;
}

/** What the fan-out needs. */
export interface FanOutOptions {
  readonly redis: Redis;
  readonly shards: readonly FanOutShard[];
  /** The subscriptions, cached by the caller. */
  readonly subscriptions: () => Promise<Subscription[]>;
  /** This deliverer's name in the group. */
  readonly consumer: string;
  /** How long an event stays with a consumer before another one takes it over. */
  readonly claimIdleMs: number;
  readonly logger: Logger;
}

/** Events read per shard and round. */
const BATCH = 100;
/** The wait between rounds that found nothing; the wait after a failed round is longer. */
const IDLE_MS = 250;
const ERROR_BACKOFF_MS = 2_000;

type Entries = [id: string, fields: string[] | null][];

/** Starts the fan-out loop; `stop` ends it after the running round. */
export function startFanOut(options: FanOutOptions): { stop(): Promise<void> } {
  const stopping = new AbortController();
  const groups = new Set<string>();
  const loop = (async () => {
    while (!stopping.signal.aborted) {
      let waitMs = IDLE_MS;
      try {
        const subscriptions = (await options.subscriptions()).filter((s) => !s.disabledAt);
        let moved = 0;
        // No subscription: the group is not even made, so a deployment without webhooks pays nothing.
        for (const shard of subscriptions.length > 0 ? options.shards : []) {
          moved += await fanOutShard(options, shard, subscriptions, groups);
        }
        if (moved > 0) waitMs = 0;
      } catch (err) {
        groups.clear();
        options.logger.warn({ err }, WEBHOOK_NAMES.fanOutError);
        waitMs = ERROR_BACKOFF_MS;
      }
      if (waitMs > 0) await pause(waitMs, stopping.signal);
    }
  })();
  return {
    async stop() {
      stopping.abort();
      await loop;
    },
  };
}

/** One round of one shard: claims what a dead deliverer left, reads new events, queues, acks. */
async function fanOutShard(
  options: FanOutOptions,
  shard: FanOutShard,
  subscriptions: readonly Subscription[],
  groups: Set<string>,
): Promise<number> {
  const { redis, consumer } = options;
  const stream = shard.eventsStream;
  if (!groups.has(stream)) {
    await ensureGroup(redis, stream);
    groups.add(stream);
  }
  const claimed = (await redis.xautoclaim(
    stream,
    WEBHOOK_GROUP,
    consumer,
    options.claimIdleMs,
    '0',
    'COUNT',
    BATCH,
  )) as [string, Entries, string[]?];
  const read = (await redis.xreadgroup(
    'GROUP',
    WEBHOOK_GROUP,
    consumer,
    'COUNT',
    BATCH,
    'STREAMS',
    stream,
    '>',
  )) as [string, Entries][] | null;
  const entries = [...claimed[1], ...(read?.[0]?.[1] ?? [])];
  if (entries.length === 0) return 0;
  const deliveries: NewDelivery[] = [];
  for (const [id, fields] of entries) {
    if (!fields) continue; // Trimmed from the stream while it was pending.
    const event = webhookEventOf(fields);
    const publishedAt = Number(id.split('-')[0]);
    for (const subscription of subscriptions)
      if (wants(subscription, { ...event, publishedAt })) deliveries.push({ subscription, event });
  }
  await addDeliveries(shard.queue, redis, shard.prefix, deliveries, Date.now());
  await redis.xack(stream, WEBHOOK_GROUP, ...entries.map(([id]) => id));
  return entries.length;
}

/**
 * Makes the group on `stream` (and the stream) when missing, at its end: a subscription gets the
 * events published after it was added, not the stream's history.
 */
export async function ensureGroup(redis: Redis, stream: string): Promise<void> {
  await redis.xgroup('CREATE', stream, WEBHOOK_GROUP, '$', 'MKSTREAM').catch((err: unknown) => {
    if (!String(err).includes('BUSYGROUP')) throw err;
  });
}

/** Waits `ms`, or until `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
