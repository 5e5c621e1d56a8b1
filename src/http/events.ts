import { once } from 'node:events';
import { Router, type RequestHandler, type Response } from 'express';
import { eventBody } from '../dispatch/event-body.js';
import { checkCursorGaps, CursorGapError } from '../store/event-gaps.js';
import { formatCursor, readEventPage, type Cursor } from '../store/event-pages.js';
import { LayoutError } from '../redis/layout.js';
import { within } from '../time/deadline.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { requireScope } from './scopes.js';
import { sendError } from './errors.js';
import type { EventFeed } from './event-feed.js';
import {
  gapAnswer,
  badQuery,
  parseQuery,
  REDIS_TIMEOUT_MS,
  RETRY_MS,
  unavailable,
  type BadQuery,
  type From,
  type Query,
} from './event-query.js';

/**
 * The completion events over HTTP (contract, section 5): `GET /v1/events`, pages with a cursor,
 * and `GET /v1/events/stream`, server-sent events whose `id:` is the cursor. Both read every
 * shard's stream in one order (`store/event-pages.ts`) and send each event as
 * {@link eventBody} makes it, the same body webhooks carry.
 */

/** Events one stream writes per read, so one stream's backlog does not monopolise Redis. */
const STREAM_PAGE = 100;
/** What the routes need; without a feed (no EVENTS_TOKEN) they only say how to turn them on. */
export interface EventsRouterOptions {
  readonly feed: EventFeed | undefined;
  readonly logger: Logger;
}

/** `GET /v1/events` and `GET /v1/events/stream`. */
export function eventsRouter({ feed, logger }: EventsRouterOptions): Router {
  const router = Router();
  if (!feed) {
    router.use('/v1/events', (_req, res) => {
      sendError(res, 404, 'the events API is off: set EVENTS_TOKEN to read events over HTTP');
    });
    return router;
  }
  const auth = requireScope('events');
  const layout = sameLayout(feed, logger);
  router.get('/v1/events', auth, layout, pageHandler(feed, logger));
  router.get('/v1/events/stream', auth, layout, streamHandler(feed, logger));
  return router;
}

/** `GET /v1/events`: one page after `after`, and the cursor after it. */
function pageHandler(feed: EventFeed, logger: Logger): RequestHandler {
  return async (req, res) => {
    const query = parseQuery(req, feed.streams.length, ['after', req.query['after']]);
    if ('bad' in query) return badQuery(res, query);
    try {
      const page = await within(
        readEventPage(feed.redis, feed.streams, query.cursor, query),
        REDIS_TIMEOUT_MS,
        () => undefined,
      );
      if (!page) return unavailable(res);
      const events = page.entries.map((e) => eventBody(e.fields));
      res.set('cache-control', 'no-store').json({ events, next: formatCursor(page.next) });
    } catch (err) {
      if (err instanceof CursorGapError) return gapAnswer(res, query, err);
      logger.warn({ err }, LIFECYCLE.redisError);
      unavailable(res);
    }
  };
}

/** `GET /v1/events/stream`: server-sent events after `Last-Event-ID` (or `after`), live. */
function streamHandler(feed: EventFeed, logger: Logger): RequestHandler {
  return async (req, res) => {
    // A reconnecting EventSource sends the last `id:` it saw; it wins over the first `after`.
    // An empty one is no id at all (what the specification's client would send, if anything).
    const lastId = req.get('last-event-id');
    const after: From = lastId ? ['Last-Event-ID', lastId] : ['after', req.query['after']];
    const query = parseQuery(req, feed.streams.length, after);
    if ('bad' in query) return badQuery(res, query);
    // Checked before the 200, so that an EventSource told 400 or 410 stops reconnecting.
    const gap = query.fromStart ? undefined : await gapAt(feed, query.cursor, logger);
    if (gap === 'unavailable') return unavailable(res);
    if (gap) return gapAnswer(res, query, gap);
    // A client that left during the checks above (layout, cursor) already sent its `close`: a
    // stream opened now would never hear it, and would keep its place under the cap for ever.
    if (req.socket.destroyed) return;
    const stream = feed.open();
    if (!stream) {
      res.set('retry-after', String(RETRY_MS / 1000));
      return sendError(res, 503, 'too many event streams open on this server; retry later');
    }
    req.socket.setTimeout(0);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: ${RETRY_MS}\n\n`);
    const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), feed.heartbeatMs);
    // Ends at once when the client leaves or the server shuts down, even while a read of the
    // stream still waits for Redis (its answer is then dropped).
    stream.signal.addEventListener(
      'abort',
      () => {
        clearInterval(heartbeat);
        res.end();
      },
      { once: true },
    );
    res.once('close', stream.close);
    void sendEvents(feed, res, query, stream.signal, logger).finally(stream.close);
  };
}

/**
 * Writes the events after the query's cursor as they come, until `signal` (the client left, or
 * the server shuts down). After a page whose last entries the filter dropped, an `id:` alone
 * moves the client's cursor past them, so a reconnect does not read them again.
 */
async function sendEvents(
  feed: EventFeed,
  res: Response,
  query: Exclude<Query, BadQuery>,
  signal: AbortSignal,
  logger: Logger,
): Promise<void> {
  let cursor = query.cursor;
  let told = formatCursor(cursor);
  for (let first = true; !signal.aborted; first = false) {
    const options = { ...query, limit: STREAM_PAGE, fromStart: first && query.fromStart };
    const page = await readEventPage(feed.redis, feed.streams, cursor, options).catch(
      (err: unknown) => {
        if (err instanceof CursorGapError) return 'gap' as const;
        logger.warn({ err }, LIFECYCLE.redisError);
      },
    );
    // Trimmed past while the client read slowly: the stream ends, its reconnect is told 410.
    if (page === 'gap') return;
    if (!page) {
      await pause(RETRY_MS, signal);
      continue;
    }
    for (const e of page.entries) {
      const data = JSON.stringify(eventBody(e.fields));
      await write(res, `id: ${e.cursor}\ndata: ${data}\n\n`, signal, feed.stallMs);
      told = e.cursor;
    }
    cursor = page.next;
    const next = formatCursor(cursor);
    if (next !== told) await write(res, `id: ${next}\n\n`, signal, feed.stallMs);
    told = next;
    if (page.caughtUp) await feed.newer(cursor, signal);
  }
}

/** The gap at `cursor`, none, or `unavailable` when Redis did not answer the check. */
async function gapAt(
  feed: EventFeed,
  cursor: Cursor,
  logger: Logger,
): Promise<CursorGapError | 'unavailable' | undefined> {
  const check = checkCursorGaps(feed.redis, feed.streams, cursor).then(() => undefined);
  try {
    return await within(check, REDIS_TIMEOUT_MS, () => 'unavailable' as const);
  } catch (err) {
    if (err instanceof CursorGapError) return err;
    logger.warn({ err }, LIFECYCLE.redisError);
    return 'unavailable';
  }
}

/**
 * Writes `chunk`, waiting for the socket to drain when the client reads slowly. A client that
 * reads nothing for `stallMs` is cut off (its `close` then ends the stream): it would otherwise
 * hold its place under the cap for ever, and a few such clients would shut every other one out.
 */
async function write(
  res: Response,
  chunk: string,
  signal: AbortSignal,
  stallMs: number,
): Promise<void> {
  if (signal.aborted || res.write(chunk)) return;
  const stalled = AbortSignal.timeout(stallMs);
  await once(res, 'drain', { signal: AbortSignal.any([signal, stalled]) }).catch(() => undefined);
  if (stalled.aborted && !signal.aborted) res.destroy();
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/**
 * 500 naming `DISPATCH_SHARDS` when this server's shard count is not the fleet's (an operator must
 * fix it; retrying cannot), 503 when Redis does not answer the check.
 */
function sameLayout(feed: EventFeed, logger: Logger): RequestHandler {
  return (_req, res, next) => {
    const timeout = () => {
      throw new Error(`no answer from Redis within ${REDIS_TIMEOUT_MS} ms`);
    };
    within(feed.checkLayout(), REDIS_TIMEOUT_MS, timeout).then(
      () => next(),
      (err: unknown) => {
        if (!(err instanceof LayoutError)) return unavailable(res);
        logger.error({ err }, LIFECYCLE.httpError);
        sendError(res, 500, err.message, { code: err.code, setting: err.setting });
      },
    );
  };
}
