import express, { type RequestHandler } from 'express';
import { bodyTooLargeMessage, sendError } from './errors.js';

/**
 * Bounds the memory request bodies can take: each body is at most `HTTP_BODY_MAX` bytes (after
 * gzip is inflated), and the bodies being read and handled at once share `HTTP_BODY_INFLIGHT_MAX`
 * bytes. A JSON body is held three or four times over while it is parsed (its chunks, its text,
 * its objects), so without the shared bound a few large authenticated bodies at once would take
 * the process to hundreds of MB, and a few more out of memory.
 */

/** What a JSON body reader needs: the two settings. */
export interface BodyBudgetOptions {
  /** `HTTP_BODY_MAX`: the largest body read, inflated. */
  readonly maxBytes: number;
  /** `HTTP_BODY_INFLIGHT_MAX`: bytes of bodies read and handled at once, across requests. */
  readonly inflightMaxBytes: number;
}

/** Seconds a client is asked to wait when the budget is spent: bodies in flight end quickly. */
const RETRY_AFTER_S = 1;

/** The shared budget and the handlers that read a JSON body within it. */
export interface BodyBudget {
  /** Bytes reserved by the bodies in flight now. */
  inflightBytes(): number;
  /**
   * Handlers that reserve a body's bytes (or refuse it: 413 over the limit, 503 with
   * `Retry-After` over the shared budget), then parse it as JSON. `limitBytes` lowers the
   * limit for a route whose bodies are small.
   */
  json(limitBytes?: number): RequestHandler[];
}

/** Creates the budget of one server; every JSON route of the app reads through it. */
export function createBodyBudget(options: BodyBudgetOptions): BodyBudget {
  let inflight = 0;
  const reserve =
    (limitBytes: number): RequestHandler =>
    (req, res, next) => {
      const declared = Number(req.get('content-length') ?? NaN);
      const identity = (req.get('content-encoding') ?? 'identity').toLowerCase() === 'identity';
      if (identity && declared > limitBytes) return tooLarge(res, limitBytes);
      // A compressed or chunked body may grow to the limit: that much is held for it.
      const bytes = identity && Number.isFinite(declared) ? declared : limitBytes;
      if (bytes === 0) return next();
      if (inflight + bytes > options.inflightMaxBytes) {
        res.set('retry-after', String(RETRY_AFTER_S));
        return sendError(
          res,
          503,
          'too many request bodies are being read at once (HTTP_BODY_INFLIGHT_MAX); retry shortly',
          { code: 'busy' },
        );
      }
      inflight += bytes;
      // The parsed body lives until the answer is sent: released then, or when the client leaves.
      res.once('close', () => (inflight -= bytes));
      next();
    };
  return {
    inflightBytes: () => inflight,
    json(limitBytes = options.maxBytes) {
      const limit = Math.min(limitBytes, options.maxBytes);
      return [reserve(limit), express.json({ limit, strict: false })];
    },
  };
}

/**
 * 413 before reading anything. Node discards the unread body (it is never held), so the client
 * finishes its upload and reads the answer instead of a broken pipe.
 */
function tooLarge(res: Parameters<RequestHandler>[1], limitBytes: number): void {
  sendError(res, 413, bodyTooLargeMessage(limitBytes), { code: 'too_large' });
}
