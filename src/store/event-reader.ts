import type { Redis } from 'ioredis';
import { keepResolved, LIBRARY_DEFAULTS } from '../config/index.js';
import { connect } from '../redis/connections.js';
import { shardLayout } from '../redis/keys.js';
import { fleetShardCount } from '../redis/layout.js';
import { asRedisFailure, untilReady } from '../redis/failure.js';
import { readEventEntry, type EventType } from '../dispatch/event.js';

/**
 * The library's reader of completion events (contract, section 4): one consumer group on every
 * shard's stream, read as one. A script can only write its own slot, so each shard publishes to
 * its own stream; the reader reads each (one command per stream, never a multi-key XREADGROUP,
 * which a cluster refuses across slots) and acknowledges each event on the stream it came from.
 * Without `shards` it reads the count the fleet recorded in Redis, as the producer does. Its
 * connection fails fast: every failure is an `AgentDispatchError` (`RedisUnavailableError` when
 * Redis does not answer within `readyTimeoutMs`), never a call that does not settle.
 */

/** One completion event as read: the contract's fields, `event` parsed, and where it came from. */
export interface CompletionEvent {
  /** The stream entry id, in its shard's stream. */
  readonly id: string;
  readonly shard: number;
  readonly stream: string;
  readonly type: EventType;
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly status: string;
  readonly prLink: string;
  /** The `event` field, parsed (its raw text when it is not JSON). */
  readonly event: unknown;
  /** Every field of the entry as written. */
  readonly fields: Readonly<Record<string, string>>;
}

/** Options of {@link createEventReader}; the deployment ones default as the service's settings do. */
export interface EventReaderOptions {
  redisUrl: string;
  /** The consumer group, created on every shard's stream when missing. */
  group: string;
  /** This consumer's name within the group. */
  consumer: string;
  /** `DISPATCH_PREFIX`. @defaultValue `LIBRARY_DEFAULTS.prefix` */
  prefix?: string;
  /** `EVENTS_STREAM`. @defaultValue `LIBRARY_DEFAULTS.eventsStream` */
  eventsStream?: string;
  /**
   * `DISPATCH_SHARDS`: refused (`LayoutError`) when it differs from the count the fleet recorded.
   * @defaultValue the fleet's recorded count, else `LIBRARY_DEFAULTS.shards`
   */
  shards?: number;
  /** `REDIS_CLUSTER`. @defaultValue `LIBRARY_DEFAULTS.cluster` */
  cluster?: boolean;
  /** Where a new group starts: `0` (every kept event) or `$` (only new ones). @defaultValue `0` */
  startAt?: '0' | '$';
  /** How long a call waits for Redis to be reachable before it fails. @defaultValue 5000 */
  readyTimeoutMs?: number;
}

/** Reads completion events of every shard with one consumer group. */
export interface EventReader {
  /**
   * Up to `count` new events per shard, delivered to this consumer (XREADGROUP `>`), ordered by
   * id; waits up to `blockMs` (polling each shard) when there are none. @defaultValue count 100,
   * blockMs 0
   */
  read(options?: { count?: number; blockMs?: number }): Promise<CompletionEvent[]>;
  /**
   * Acknowledges events (XACK), on the stream of each one's shard. Rejects as `read` does.
   */
  ack(events: readonly Pick<CompletionEvent, 'id' | 'stream'>[]): Promise<void>;
  close(): Promise<void>;
}

/** How often `read` looks at the shards again while it waits for an event. */
const POLL_MS = 100;

type StreamReply = [stream: string, entries: [id: string, fields: string[]][]][] | null;

/** Creates a reader. The shard count is read and its groups are created on the first `read`. */
export function createEventReader(options: EventReaderOptions): EventReader {
  const resolved = {
    prefix: options.prefix ?? LIBRARY_DEFAULTS.prefix,
    eventsStream: options.eventsStream ?? LIBRARY_DEFAULTS.eventsStream,
    cluster: options.cluster ?? LIBRARY_DEFAULTS.cluster,
    // The count when neither the option nor the fleet's record gives one.
    shards: options.shards ?? LIBRARY_DEFAULTS.shards,
    readyTimeoutMs: options.readyTimeoutMs ?? 5_000,
  };
  const { cluster, prefix, readyTimeoutMs } = resolved;
  const redis: Redis = connect(
    { redisUrl: options.redisUrl, redisCluster: cluster },
    'producer',
    `events:${options.consumer}`,
  );
  redis.on('error', () => {
    // Reaches the caller as a rejected read or ack; the connection reconnects by itself.
  });
  // The streams once the fleet's count is known; read again while no role has recorded one.
  let known: readonly string[] | undefined;
  const grouped = new Set<string>();

  async function streams(): Promise<readonly string[]> {
    if (known) return known;
    const { count, recorded } = await fleetShardCount(redis, {
      cluster,
      prefix,
      configured: options.shards,
      unset: resolved.shards,
    });
    const all = shardLayout(prefix, resolved.eventsStream, count, cluster).map(
      (s) => s.eventsStream,
    );
    if (recorded || options.shards !== undefined) known = all;
    await Promise.all(
      all
        .filter((s) => !grouped.has(s))
        .map(async (s) => {
          await redis
            .xgroup('CREATE', s, options.group, options.startAt ?? '0', 'MKSTREAM')
            .catch((err: unknown) => {
              if (!String(err).includes('BUSYGROUP')) throw err;
            });
          grouped.add(s);
        }),
    );
    return all;
  }

  /** `call` once Redis is ready, its failure an `AgentDispatchError`. */
  async function guarded<T>(call: () => Promise<T>): Promise<T> {
    try {
      await untilReady(redis, readyTimeoutMs);
      return await call();
    } catch (err) {
      throw asRedisFailure(err, redis);
    }
  }

  async function readOnce(all: readonly string[], count: number): Promise<CompletionEvent[]> {
    const replies = await Promise.all(
      all.map(
        (s) =>
          redis.xreadgroup(
            'GROUP',
            options.group,
            options.consumer,
            'COUNT',
            count,
            'STREAMS',
            s,
            '>',
          ) as Promise<StreamReply>,
      ),
    );
    return replies
      .flatMap((reply, shard) =>
        (reply ?? []).flatMap(([stream, entries]) =>
          entries.map(([id, flat]) => toEvent(shard, stream, id, flat)),
        ),
      )
      .sort((a, b) => compareIds(a.id, b.id));
  }

  return keepResolved<EventReader>(
    {
      read: ({ count = 100, blockMs = 0 } = {}) =>
        guarded(async () => {
          const all = await streams();
          const deadline = Date.now() + blockMs;
          for (;;) {
            const events = await readOnce(all, count);
            if (events.length > 0 || Date.now() >= deadline) return events;
            await new Promise((r) => setTimeout(r, Math.min(POLL_MS, deadline - Date.now())));
          }
        }),
      ack: (events) =>
        guarded(async () => {
          const byStream = new Map<string, string[]>();
          for (const e of events) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e.id]);
          await Promise.all(
            [...byStream].map(([stream, ids]) => redis.xack(stream, options.group, ...ids)),
          );
        }),
      async close() {
        redis.disconnect();
      },
    },
    resolved,
  );
}

/** Orders stream ids (`ms-seq`) as numbers. */
export function compareIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am - bm || as - bs;
}

function toEvent(shard: number, stream: string, id: string, flat: string[]): CompletionEvent {
  const { type, ...rest } = readEventEntry(flat);
  return { id, shard, stream, type: type as EventType, ...rest };
}
