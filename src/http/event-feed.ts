import type { Redis } from 'ioredis';
import { compareIds } from '../store/event-reader.js';
import { newestCursor, type Cursor } from '../store/event-pages.js';
import { LayoutError, recordedShardCount } from '../redis/layout.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';

/**
 * What the server's event streams (`/v1/events/stream`) share: one Redis connection, the cap on
 * streams open at once, and one poller that tells a caught-up stream when its shards have newer
 * entries.
 *
 * Why one shared poller rather than a blocking XREAD per stream: a blocking read holds its
 * connection, so N streams would need N connections (times the shards on a cluster, which refuses
 * one XREAD across slots), and the server's connections to Redis would grow with its clients.
 * The poller costs one XREVRANGE per shard per round whatever the number of streams, runs only
 * while a stream waits, and each stream then reads its own page from its own cursor: a stream's
 * events never depend on what the poller saw, so none can be lost between the two.
 */

/** Options of the feed; the defaults are the service's. */
export interface EventFeedOptions {
  /** Most streams open at once; past it a new one is answered 503. @defaultValue 100 */
  readonly maxStreams?: number;
  /** Period of the heartbeat comment of an idle stream. @defaultValue 15000 */
  readonly heartbeatMs?: number;
  /** How often the poller looks at the shards while a stream waits. @defaultValue 250 */
  readonly pollMs?: number;
  /**
   * How long a stream waits for a client that reads nothing before it cuts it off: else a client
   * that stops reading keeps its place under the cap for ever. @defaultValue 60000
   */
  readonly stallMs?: number;
}

/** One open stream: how the feed ends it when the server shuts down. */
export interface OpenStream {
  readonly signal: AbortSignal;
  /** Ends the stream and gives its place back. Idempotent. */
  close(): void;
}

/** The shared part of the event streams of one server. */
export interface EventFeed {
  readonly redis: Redis;
  readonly streams: readonly string[];
  readonly heartbeatMs: number;
  readonly stallMs: number;
  /** A stream's place under the cap, or `undefined` when the cap is reached or the feed closed. */
  open(): OpenStream | undefined;
  /** Resolves once some shard has an entry after `cursor`, or when `signal` aborts. */
  newer(cursor: Cursor, signal: AbortSignal): Promise<void>;
  /** Ends every open stream and stops the poller. */
  close(): Promise<void>;
  /**
   * Resolves when the fleet's recorded shard count (if any) is the feed's; rejects with a
   * {@link LayoutError} naming `DISPATCH_SHARDS` when not: reading another layout's streams would
   * serve a part of the events as all of them. Read once, again after a failure.
   */
  checkLayout(): Promise<void>;
}

/** Where the fleet recorded its shard count: the deployment's `DISPATCH_PREFIX`. */
interface Layout {
  readonly prefix: string;
}

interface Waiter {
  readonly cursor: Cursor;
  readonly wake: () => void;
}

/** Creates the feed of `streams` (every shard's, by index) on `redis`. */
export function createEventFeed(
  redis: Redis,
  streams: readonly string[],
  logger: Logger,
  {
    maxStreams = 100,
    heartbeatMs = 15_000,
    pollMs = 250,
    stallMs = 60_000,
    prefix,
  }: EventFeedOptions & Layout,
): EventFeed {
  const open = new Set<AbortController>();
  const waiters = new Set<Waiter>();
  let polling: Promise<void> | undefined;
  let closed = false;
  let layout: Promise<void> | undefined;

  async function poll(): Promise<void> {
    while (waiters.size > 0 && !closed) {
      try {
        const newest = await newestCursor(redis, streams);
        for (const w of waiters) if (isAfter(newest, w.cursor)) w.wake();
      } catch (err) {
        // The streams keep waiting: Redis reconnects by itself, the next round tries again.
        logger.warn({ err }, LIFECYCLE.redisError);
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
    polling = undefined;
  }

  return {
    redis,
    streams,
    heartbeatMs,
    stallMs,
    open() {
      if (closed || open.size >= maxStreams) return undefined;
      const controller = new AbortController();
      open.add(controller);
      return {
        signal: controller.signal,
        close: () => {
          open.delete(controller);
          controller.abort();
        },
      };
    },
    newer(cursor, signal) {
      return new Promise<void>((resolve) => {
        const waiter: Waiter = {
          cursor,
          wake: () => {
            waiters.delete(waiter);
            signal.removeEventListener('abort', waiter.wake);
            resolve();
          },
        };
        if (signal.aborted) return resolve();
        waiters.add(waiter);
        signal.addEventListener('abort', waiter.wake, { once: true });
        polling ??= poll();
      });
    },
    checkLayout() {
      layout ??= recordedShardCount(redis, prefix).then((recorded) => {
        if (recorded !== undefined && recorded !== streams.length)
          throw new LayoutError(
            'DISPATCH_SHARDS',
            `is ${streams.length} on this server, but the fleet on its Redis records ${recorded} shards`,
          );
      });
      // A Redis that did not answer is asked again by the next request.
      layout.catch(() => (layout = undefined));
      return layout;
    },
    async close() {
      closed = true;
      for (const controller of open) controller.abort();
      open.clear();
      for (const w of waiters) w.wake();
      // The poller is not awaited: a round that waits for Redis ends when the server drops the
      // feed's connection, and its loop stops at the next check of `closed`.
    },
  };
}

/** Whether some shard of `newest` is past its place in `cursor`. */
function isAfter(newest: Cursor, cursor: Cursor): boolean {
  return newest.some((id, i) => compareIds(id, cursor[i] ?? '0-0') > 0);
}
