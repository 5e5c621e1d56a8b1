import { Router, type Request, type RequestHandler, type Response } from 'express';
import { ID_MAX_CHARS, META_MAX_BYTES, type FollowUpInput } from '../dispatch/followup.js';
import {
  BacklogFullError,
  conflictProblem,
  IdempotencyConflictError,
  InvalidFollowUpError,
  RedisCommandError,
  RedisUnavailableError,
  type Producer,
} from '../producer/index.js';
import type { Logger } from '../telemetry/logger.js';
import type { CreateInput, DispatchInput } from '../dispatch/creation.js';
import type { BodyBudget } from './body-budget.js';
import { answerCall, sendError } from './errors.js';
import { requireScope } from './scopes.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { withTraceparent } from '../telemetry/trace-context.js';

/** Most follow-ups one request may carry. */
export const MAX_BATCH = 1_000;

/**
 * The JSON body limit: `HTTP_BODY_MAX`, or less when even a full batch of largest follow-ups
 * (prompt, meta, ids and their JSON punctuation) is smaller.
 */
export function intakeBodyLimitBytes(promptMaxBytes: number, bodyMaxBytes: number): number {
  const perFollowUp = promptMaxBytes + META_MAX_BYTES + 3 * ID_MAX_CHARS + 512;
  return Math.min(perFollowUp * MAX_BATCH, bodyMaxBytes);
}

/** What the intake needs; without a producer it only explains how to turn it on. */
export interface IntakeOptions {
  readonly producer: Producer | undefined;
  /** The limit of a body; see {@link intakeBodyLimitBytes}. */
  readonly bodyLimitBytes: number;
  /** The server's shared budget of body bytes. */
  readonly bodies: BodyBudget;
  readonly logger: Logger;
}

/**
 * `POST /v1/followups` (one, an array, or `{"followups": [...]}`), `POST /v1/jobs` (creations)
 * and `GET /v1/followups/:id`.
 */
export function intakeRouter(options: IntakeOptions): Router {
  const router = Router();
  const { producer, logger } = options;
  const auth = requireScope('intake');
  if (!producer) {
    // Only the intake's own routes: DELETE /v1/followups/:id is the operator's.
    const off: RequestHandler = (_req, res) =>
      sendError(res, 404, 'the intake is off: set INTAKE_TOKEN to accept follow-ups over HTTP');
    router.post('/v1/followups', auth, off);
    router.post('/v1/jobs', auth, off);
    router.get('/v1/followups/:dispatchId', auth, off);
    return router;
  }
  const json = options.bodies.json(options.bodyLimitBytes);
  router.post('/v1/followups', auth, requireJson, ...json, async (req, res) => {
    const body: unknown = req.body;
    const batch = asBatch(body);
    if (typeof batch === 'string')
      return sendError(res, 400, 'invalid follow-up', {
        problems: [{ field: '(body)', message: batch }],
      });
    // An incoming W3C `traceparent` header is the parent of each follow-up's `send dispatch`.
    const traceparent = req.get('traceparent');
    await answer(res, logger, () =>
      withTraceparent(traceparent, async () =>
        batch
          ? { results: await producer.sendMany(batch) }
          : await producer.send(body as FollowUpInput),
      ),
    );
  });
  // Creations: one, or an array (`producer.create`, or `sendMany` of `"create": true` items).
  router.post('/v1/jobs', auth, requireJson, ...json, async (req, res) => {
    const body: unknown = req.body;
    if (Array.isArray(body) && (body.length === 0 || body.length > MAX_BATCH))
      return sendError(res, 400, 'invalid creation', {
        problems: [{ field: '(body)', message: `a batch carries 1 to ${MAX_BATCH} creations` }],
      });
    const asCreation = (item: unknown) => (isObject(item) ? { ...item, create: true } : item);
    await answer(res, logger, () =>
      withTraceparent(req.get('traceparent'), async () =>
        Array.isArray(body)
          ? { results: await producer.sendMany(body.map(asCreation) as DispatchInput[]) }
          : await producer.create(body as CreateInput),
      ),
    );
  });
  router.get('/v1/followups/:dispatchId', auth, async (req, res) => {
    await answer(res, logger, async () => {
      const status = await producer.status(String(req.params['dispatchId']));
      return status ?? undefined;
    });
  });
  return router;
}

/**
 * The follow-ups of a batch body, `undefined` for a single follow-up (validated by the producer),
 * or a message saying what is wrong with the body's shape.
 */
function asBatch(body: unknown): FollowUpInput[] | undefined | string {
  const list = isObject(body) && 'followups' in body ? body['followups'] : body;
  const others = list === body ? [] : Object.keys(body as object).filter((k) => k !== 'followups');
  if (others.length > 0)
    return `unknown field ${others.join(', ')}; send {"followups": [...]} alone`;
  if (!Array.isArray(list)) {
    if (list !== body) return '"followups" must be an array';
    return isObject(body)
      ? undefined
      : 'expected a follow-up object, an array of them, or {"followups": [...]}';
  }
  if (list.length === 0) return 'the batch is empty';
  if (list.length > MAX_BATCH)
    return `a batch carries at most ${MAX_BATCH} follow-ups, got ${list.length}`;
  return list as FollowUpInput[];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Runs a producer call: its result as 202 (POST) or 200 (GET), `undefined` as 404, failures mapped. */
async function answer(
  res: Response,
  logger: Logger,
  call: () => Promise<object | undefined>,
): Promise<void> {
  await answerCall(res, call, {
    status: res.req.method === 'POST' ? 202 : 200,
    notFound: 'no such dispatch (unknown, or expired after DISPATCH_RETENTION)',
    failure: (err) => answerFailure(res, logger, err),
  });
}

/**
 * Maps a failure by its class: invalid input 400, a key conflict 409, a project's backlog full
 * 429 (nothing enqueued; retry after Retry-After), Redis unreachable 503, anything else a logged
 * 500. A default of 503 would make clients retry
 * forever an input that can never succeed.
 */
function answerFailure(res: Response, logger: Logger, err: unknown): void {
  if (err instanceof InvalidFollowUpError)
    return sendError(res, 400, 'invalid follow-up', { code: err.code, problems: err.problems });
  if (err instanceof IdempotencyConflictError) {
    const problems = err.conflicts.map((conflict) => ({
      ...(conflict.index === undefined ? {} : { index: conflict.index }),
      ...conflictProblem(conflict),
      dispatchId: conflict.dispatchId,
    }));
    // A batch's other follow-ups were enqueued: their results say so, so nothing is sent twice.
    const batch = err.conflicts.some((c) => c.index !== undefined);
    return sendError(res, 409, 'idempotency key conflict: the key was used for another follow-up', {
      code: err.code,
      problems,
      ...(batch ? { results: err.results } : {}),
    });
  }
  if (err instanceof BacklogFullError) {
    res.set('retry-after', String(Math.ceil(err.retryAfterMs / 1000)));
    return sendError(res, 429, err.message, {
      code: err.code,
      projectId: err.projectId,
      retryAfterMs: err.retryAfterMs,
    });
  }
  if (err instanceof RedisUnavailableError) {
    // The write may still have landed, so the advice is to retry with the same idempotency key.
    logger.warn({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeUnavailable);
    res.set('retry-after', '5');
    return sendError(
      res,
      503,
      'Redis is unavailable; retry later, with the same key to avoid a duplicate',
      { code: err.code },
    );
  }
  if (err instanceof RedisCommandError) {
    // Redis's configuration or state (a memory limit, a failed save), not this request.
    logger.error({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeError);
    return sendError(
      res,
      503,
      'Redis refused the call; retry with the same key once its cause (see the server log) is fixed',
      { code: err.code },
    );
  }
  logger.error({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeError);
  sendError(res, 500, 'internal error; see the server log');
}

/**
 * 415 for a body that is not declared JSON, so a form post gets an answer that says why, and for
 * a charset other than UTF-8 (RFC 8259): the body parser would decode UTF-16 and read garbage.
 */
export function requireJson(req: Request, res: Response, next: () => void): void {
  if (!req.is(['application/json', 'application/*+json'])) {
    return sendError(res, 415, 'send the follow-ups as Content-Type: application/json');
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.get('content-type') ?? '')?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset))
    return sendError(res, 415, 'request body must be UTF-8 JSON (charset=utf-8, or none)');
  next();
}
