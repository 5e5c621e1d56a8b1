import { once } from 'node:events';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import { eventBody, eventTypeNamed } from '../dispatch/event-body.js';
import {
  CursorError,
  formatCursor,
  parseCursor,
  readEventPage,
  startCursor,
  type Cursor,
  type EventFilter,
} from '../dispatch/event-pages.js';
import { LayoutError } from '../redis/layout.js';
import { within } from '../runtime/deadline.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { requireScope } from './scopes.js';
import { sendError } from './errors.js';
import type { EventFeed } from './event-feed.js';

/**
 * The completion events over HTTP (contract, section 5): `GET /v1/events`, pages with a cursor,
 * and `GET /v1/events/stream`, server-sent events whose `id:` is the cursor. Both read every
 * shard's stream in one order (`dispatch/event-pages.ts`) and send each event as
 * {@link eventBody} makes it, the same body webhooks carry.
 */

/** Most events one page may hold. */
export const LIMIT_MAX = 1_000;
/** Events a page holds when `limit` is not given. */
export const LIMIT_DEFAULT = 100;
/** Events one stream writes per read, so one stream's backlog does not monopolise Redis. */
const STREAM_PAGE = 100;
/** Longest wait for Redis per page before the request is answered 503. */
const REDIS_TIMEOUT_MS = 5_000;
/** How long a stream whose read failed waits before it reads again; what a client waits on 503. */
const RETRY_MS = 1_000;

/** What the routes need; without a feed (no EVENTS_TOKEN) they only say how to turn them on. */
export interface EventsRouterOptions {
  readonly feed: EventFeed | undefined;
  readonly logger: Logger;
}

/** A request's cursor and filter, or the message of a 400 naming the parameter. */
type Query = { cursor: Cursor; filter: EventFilter; limit: number } | string;

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
    const query = parseQuery(req, feed.streams.length, req.query['after']);
    if (typeof query === 'string') return sendError(res, 400, query);
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
      logger.warn({ err }, LIFECYCLE.redisError);
      unavailable(res);
    }
  };
}

/** `GET /v1/events/stream`: server-sent events after `Last-Event-ID` (or `after`), live. */
function streamHandler(feed: EventFeed, logger: Logger): RequestHandler {
  return (req, res) => {
    // A reconnecting EventSource sends the last `id:` it saw; it wins over the first `after`.
    const query = parseQuery(
      req,
      feed.streams.length,
      req.get('last-event-id') ?? req.query['after'],
    );
    if (typeof query === 'string') return sendError(res, 400, query);
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
  query: Exclude<Query, string>,
  signal: AbortSignal,
  logger: Logger,
): Promise<void> {
  let cursor = query.cursor;
  let told = formatCursor(cursor);
  while (!signal.aborted) {
    const options = { ...query, limit: STREAM_PAGE };
    const page = await readEventPage(feed.redis, feed.streams, cursor, options).catch(
      (err: unknown) => void logger.warn({ err }, LIFECYCLE.redisError),
    );
    if (!page) {
      await pause(RETRY_MS, signal);
      continue;
    }
    for (const e of page.entries) {
      await write(res, `id: ${e.cursor}\ndata: ${JSON.stringify(eventBody(e.fields))}\n\n`, signal);
      told = e.cursor;
    }
    cursor = page.next;
    const next = formatCursor(cursor);
    if (next !== told) await write(res, `id: ${next}\n\n`, signal);
    told = next;
    if (page.caughtUp) await feed.newer(cursor, signal);
  }
}

/** Writes `chunk`, waiting for the socket to drain when the client reads slowly. */
async function write(res: Response, chunk: string, signal: AbortSignal): Promise<void> {
  if (signal.aborted || res.write(chunk)) return;
  await once(res, 'drain', { signal }).catch(() => undefined);
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

function unavailable(res: Response): void {
  res.set('retry-after', String(RETRY_MS / 1000));
  sendError(res, 503, `Redis did not answer within ${REDIS_TIMEOUT_MS} ms; retry later`);
}

/** The cursor (`after`), `limit`, `project` and `type` of a request, or a 400's message. */
function parseQuery(req: Request, shards: number, after: unknown): Query {
  const list = (value: unknown) =>
    (Array.isArray(value) ? value : value === undefined ? [] : [value]).map(String);
  let cursor = startCursor(shards);
  try {
    if (after !== undefined && after !== '') cursor = parseCursor(String(after), shards);
  } catch (err) {
    if (err instanceof CursorError) return `after: ${err.message}`;
    throw err;
  }
  const limitText = req.query['limit'];
  const limit = limitText === undefined ? LIMIT_DEFAULT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > LIMIT_MAX)
    return `limit: expected a whole number from 1 to ${LIMIT_MAX}`;
  const types = list(req.query['type']).map((t) => [t, eventTypeNamed(t)] as const);
  const unknown = types.find(([, type]) => type === undefined);
  if (unknown) return `type: unknown event type "${unknown[0].slice(0, 80)}"`;
  const filter = {
    types: new Set(types.map(([, type]) => type ?? '')),
    projects: new Set(list(req.query['project'])),
  };
  return { cursor, filter, limit };
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
        sendError(res, 500, err.message);
      },
    );
  };
}
