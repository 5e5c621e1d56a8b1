import type { Request, Response } from 'express';
import { eventTypeNamed } from '../dispatch/event-body.js';
import type { CursorGapError } from '../store/event-gaps.js';
import {
  CursorError,
  formatCursor,
  parseCursor,
  startCursor,
  type Cursor,
  type EventFilter,
} from '../store/event-pages.js';
import { sendError } from './errors.js';

/**
 * What the events routes (`events.ts`) read from a request, and the errors both routes answer
 * alike: a bad parameter, a cursor with a gap, Redis not answering.
 */

/** Most events one page may hold. */
export const LIMIT_MAX = 1_000;
export const LIMIT_DEFAULT = 100;
/** Longest wait for Redis per page before the request is answered 503. */
export const REDIS_TIMEOUT_MS = 5_000;
/** How long a stream whose read failed waits before it reads again; what a client waits on 503. */
export const RETRY_MS = 1_000;

/** A 400: its message names the parameter; a bad cursor has the code of `CursorError`. */
export interface BadQuery {
  readonly bad: string;
  readonly code?: 'invalid_cursor';
}

/** A request's cursor and filter, or why it is a 400. */
export type Query =
  | { cursor: Cursor; filter: EventFilter; limit: number; from: From[0]; fromStart: boolean }
  | BadQuery;

/** Answers a {@link BadQuery}: 400, with its code when it has one. */
export function badQuery(res: Response, { bad, code }: BadQuery): void {
  sendError(res, 400, bad, code ? { code } : {});
}

/** Where a request's cursor comes from (named in its 400), and its text. */
export type From = readonly [name: 'after' | 'Last-Event-ID', text: unknown];

/** The cursor (`after`), `limit`, `project` and `type` of a request, or a 400's message. */
export function parseQuery(req: Request, shards: number, [from, after]: From): Query {
  const list = (value: unknown) =>
    (Array.isArray(value) ? value : value === undefined ? [] : [value]).map(String);
  let cursor = startCursor(shards);
  try {
    if (after !== undefined && after !== '') cursor = parseCursor(String(after), shards);
  } catch (err) {
    if (err instanceof CursorError) return { bad: `${from}: ${err.message}`, code: err.code };
    throw err;
  }
  const limitText = req.query['limit'];
  const limit = limitText === undefined ? LIMIT_DEFAULT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > LIMIT_MAX)
    return { bad: `limit: expected a whole number from 1 to ${LIMIT_MAX}` };
  const types = list(req.query['type']).map((t) => [t, eventTypeNamed(t)] as const);
  const unknown = types.find(([, type]) => type === undefined);
  if (unknown) return { bad: `type: unknown event type "${unknown[0].slice(0, 80)}"` };
  const filter = {
    types: new Set(types.map(([, type]) => type ?? '')),
    projects: new Set(list(req.query['project'])),
  };
  return { cursor, filter, limit, from, fromStart: after === undefined || after === '' };
}

/**
 * 400 for a cursor ahead of its stream (not read from these events), 410 for one the stream was
 * trimmed past, with the `next` that goes on from the oldest kept: the loss is said, not skipped.
 */
export function gapAnswer(
  res: Response,
  query: Exclude<Query, BadQuery>,
  err: CursorGapError,
): void {
  if (err.kind === 'ahead')
    return sendError(res, 400, `${query.from}: ${err.message}`, { code: err.code });
  const next = formatCursor(err.resume(query.cursor));
  sendError(res, 410, `${query.from}: ${err.message}; "next" goes on from the oldest kept`, {
    code: err.code,
    next,
  });
}

/** 503 with `Retry-After` and `RedisUnavailableError`'s code: Redis did not answer in time, or failed. */
export function unavailable(res: Response): void {
  res.set('retry-after', String(RETRY_MS / 1000));
  sendError(res, 503, `Redis did not answer within ${REDIS_TIMEOUT_MS} ms; retry later`, {
    code: 'redis_unavailable',
  });
}
