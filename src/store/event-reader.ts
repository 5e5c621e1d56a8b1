import type { Redis } from 'ioredis';
import { LIBRARY_DEFAULTS } from '../config/index.js';
import { connect } from '../redis/connections.js';
import { shardLayout } from '../redis/keys.js';
import { readEventEntry, type EventType } from '../dispatch/event.js';

/**
 * The library's reader of completion events (contract, section 4): one consumer group on every
 * shard's stream, read as one. A script can only write its own slot, so each shard publishes to
 * its own stream; the reader reads each (one command per stream, never a multi-key XREADGROUP,
 * which a cluster refuses across slots) and acknowledges each event on the stream it came from.
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
  /** `DISPATCH_PREFIX`. @defaultValue its default */
  prefix?: string;
  /** `EVENTS_STREAM`. @defaultValue its default */
  eventsStream?: string;
  /** `DISPATCH_SHARDS`. @defaultValue its default */
  shards?: number;
  /** `REDIS_CLUSTER`. @defaultValue its default */
  cluster?: boolean;
  /** Where a new group starts: `0` (every kept event) or `$` (only new ones). @defaultValue `0` */
  startAt?: '0' | '$';
}

/** Reads completion events of every shard with one consumer group. */
export interface EventReader {
  /**
   * Up to `count` new events per shard, delivered to this consumer (XREADGROUP `>`), ordered by
   * id; waits up to `blockMs` (polling each shard) when there are none. @defaultValue count 100,
   * blockMs 0
   */
  read(options?: { count?: number; blockMs?: number }): Promise<CompletionEvent[]>;
  /** Acknowledges events (XACK), on the stream of each one's shard. */
  ack(events: readonly Pick<CompletionEvent, 'id' | 'stream'>[]): Promise<void>;
  close(): Promise<void>;
}

/** How often `read` looks at the shards again while it waits for an event. */
const POLL_MS = 100;

type StreamReply = [stream: string, entries: [id: string, fields: string[]][]][] | null;

/** Creates a reader. Its groups are created on the first `read`. */
export function createEventReader(options: EventReaderOptions): EventReader {
  const cluster = options.cluster ?? LIBRARY_DEFAULTS.cluster;
  const streams = shardLayout(
    options.prefix ?? LIBRARY_DEFAULTS.prefix,
    options.eventsStream ?? LIBRARY_DEFAULTS.eventsStream,
    options.shards ?? LIBRARY_DEFAULTS.shards,
    cluster,
  ).map((s) => s.eventsStream);
  const redis: Redis = connect(
    { redisUrl: options.redisUrl, redisCluster: cluster },
    'worker',
    `events:${options.consumer}`,
  );
  redis.on('error', () => {
    // Reaches the caller as a rejected read or ack; the connection reconnects by itself.
  });
  let groups: Promise<void> | undefined;
  const ensureGroups = () =>
    (groups ??= Promise.all(
      streams.map((s) =>
        redis
          .xgroup('CREATE', s, options.group, options.startAt ?? '0', 'MKSTREAM')
          .catch((err: unknown) => {
            if (!String(err).includes('BUSYGROUP')) throw err;
          }),
      ),
    ).then(
      () => undefined,
      (err: unknown) => {
        groups = undefined;
        throw err;
      },
    ));

  async function readOnce(count: number): Promise<CompletionEvent[]> {
    const replies = await Promise.all(
      streams.map(
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

  return {
    async read({ count = 100, blockMs = 0 } = {}) {
      await ensureGroups();
      const deadline = Date.now() + blockMs;
      for (;;) {
        const events = await readOnce(count);
        if (events.length > 0 || Date.now() >= deadline) return events;
        await new Promise((r) => setTimeout(r, Math.min(POLL_MS, deadline - Date.now())));
      }
    },
    async ack(events) {
      const byStream = new Map<string, string[]>();
      for (const e of events) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e.id]);
      await Promise.all(
        [...byStream].map(([stream, ids]) => redis.xack(stream, options.group, ...ids)),
      );
    },
    async close() {
      redis.disconnect();
    },
  };
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
