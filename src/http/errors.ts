import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { RedisUnavailableError } from '../producer/errors.js';
import { within } from '../time/deadline.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';

/**
 * Every error the HTTP server answers is JSON of the form `{"error": "...", ...details}`. Messages
 * are written here or by the route, never copied from an exception: an exception's text may carry
 * a Redis address, a token or a stack.
 */

/** Sends a JSON error. `details` adds fields next to `error` (such as `problems`). */
export function sendError(
  res: Response,
  status: number,
  message: string,
  details: Record<string, unknown> = {},
): void {
  res
    .status(status)
    .set('cache-control', 'no-store')
    .json({ error: message, ...details });
}

/** The 413 message: before a body is read (its declared length) or while it is read. */
export function bodyTooLargeMessage(limitBytes: number): string {
  return `request body is larger than ${limitBytes} bytes (HTTP_BODY_MAX); send fewer follow-ups per request`;
}

/**
 * Longest wait for Redis: the server's connection waits out an outage (the producer's waits for
 * its first connect), and a request must not be held open meanwhile.
 */
const REDIS_TIMEOUT_MS = 5_000;

/** How {@link answerCall} answers a route's call. */
export interface CallAnswers {
  /** The status of a result. */
  readonly status: number;
  /** The 404's message when the call finds nothing (`undefined`). */
  readonly notFound: string;
  /** Maps a failure (a Redis that does not answer in time: `RedisUnavailableError`) to an answer. */
  readonly failure: (err: unknown) => void;
}

/**
 * Runs a route's call on Redis for at most 5 s: its result uncached with `answers.status`,
 * `undefined` as a 404, a failure handed to `answers.failure`.
 */
export async function answerCall(
  res: Response,
  call: () => Promise<object | undefined>,
  answers: CallAnswers,
): Promise<void> {
  try {
    const result = await within(call(), REDIS_TIMEOUT_MS, () => {
      throw new RedisUnavailableError(`no answer from Redis within ${REDIS_TIMEOUT_MS} ms`);
    });
    if (result === undefined) return sendError(res, 404, answers.notFound);
    res.status(answers.status).set('cache-control', 'no-store').json(result);
  } catch (err) {
    answers.failure(err);
  }
}

/** Answers every request that no route took. */
export const notFound: RequestHandler = (req, res) => {
  sendError(res, 404, `no route for ${req.method} ${req.path}`);
};

/** The shape of the errors that express's body parser raises. */
interface BodyParserError {
  readonly type: string;
  readonly status: number;
  /** The limit passed, on `entity.too.large`. */
  readonly limit?: number;
}

function isBodyParserError(err: unknown): err is BodyParserError {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { type?: unknown }).type === 'string' &&
    typeof (err as { status?: unknown }).status === 'number'
  );
}

/**
 * A compressed body that does not inflate: the body parser passes zlib's own error on, with a
 * 400 status but no `type`; it is the client's error, not a 500.
 */
function isInflateError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, status } = err as { code?: unknown; status?: unknown };
  return status === 400 && typeof code === 'string' && /^Z_|BROTLI|ZSTD/.test(code);
}

/** The answer to a body-parser failure, or `undefined` for any other error. */
function describeBodyError(err: unknown, limitBytes: number): [number, string] | undefined {
  if (isInflateError(err))
    return [400, 'request body is not valid gzip, deflate, br or zstd data (Content-Encoding)'];
  if (!isBodyParserError(err)) return undefined;
  switch (err.type) {
    case 'entity.too.large':
      return [413, bodyTooLargeMessage(err.limit ?? limitBytes)];
    case 'entity.parse.failed':
      return [400, 'request body is not valid JSON'];
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return [415, 'request body must be UTF-8 JSON'];
    case 'request.aborted':
      return [400, 'request was aborted by the client'];
    default:
      return err.status >= 400 && err.status < 500
        ? [err.status, 'request body could not be read']
        : undefined;
  }
}

/**
 * The last handler: body-parser failures become their 4xx, anything else a logged 500 whose
 * answer says nothing about its cause.
 */
export function errorHandler(logger: Logger, bodyLimitBytes: number): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next) => {
    const known = describeBodyError(err, bodyLimitBytes);
    if (res.headersSent) {
      req.socket.destroy();
      return;
    }
    if (known) {
      sendError(res, known[0], known[1]);
      return;
    }
    logger.error({ err, method: req.method, path: req.path }, LIFECYCLE.httpError);
    sendError(res, 500, 'internal error; see the server log');
  };
}
