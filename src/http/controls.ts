import express, { Router, type Response } from 'express';
import {
  InvalidControlError,
  NotCancellableError,
  NotRedrivableError,
  RedisCommandError,
  RedisUnavailableError,
  UnknownDispatchError,
  type Admin,
  type RedriveFilter,
  type RedriveOutcome,
} from '../producer/index.js';
import { NotDurableError } from '../redis/disk-wait.js';
import { LayoutError } from '../redis/layout.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { answerCall, sendError } from './errors.js';
import { requireJson } from './intake.js';
import { requireScope } from './scopes.js';

/**
 * The operator controls over HTTP, behind `OPERATOR_TOKEN` (the `operator` scope): cancel or redrive
 * a follow-up, pause, resume, limit, show and unpark a project. Each route calls the same code as the library and the
 * CLI (`createAdmin`).
 */

/** What the control routes need; without `OPERATOR_TOKEN` they answer how to turn them on. */
export interface ControlsOptions {
  readonly admin: Admin;
  readonly logger: Logger;
}

/**
 * `DELETE /v1/followups/:dispatchId`, `POST /v1/followups/:dispatchId/redrive`, `POST /v1/redrive`
 * (a body of `RedriveFilter`, answered `{"results": [...]}`), `POST /v1/projects/:projectId/pause`, `/resume` and `/unpark`,
 * `PUT /v1/projects/:projectId/limit` (`{"limit": "50/1h"}`, with `"force": true` for one looser
 * than `SEND_RATE_LIMIT`, or `{"limit": null}`) and
 * `GET /v1/projects/:projectId`.
 */
export function controlsRouter(options: ControlsOptions): Router {
  const router = Router();
  const { admin, logger } = options;
  const auth = requireScope('operator');
  const param = (value: unknown) => String(value);
  router.delete('/v1/followups/:dispatchId', auth, (req, res) =>
    answer(res, logger, () => admin.cancel(param(req.params['dispatchId']))),
  );
  router.post('/v1/followups/:dispatchId/redrive', auth, (req, res) =>
    answer(res, logger, () => admin.redrive(param(req.params['dispatchId']))),
  );
  router.post(
    '/v1/redrive',
    auth,
    requireJson,
    express.json({ limit: REDRIVE_BODY_MAX, strict: false }),
    (req, res) =>
      answer(res, logger, async () => ({
        results: (await admin.redriveDeadLetters(req.body as RedriveFilter)).map(redriveJson),
      })),
  );
  router.post('/v1/projects/:projectId/pause', auth, (req, res) =>
    answer(res, logger, () => admin.pauseProject(param(req.params['projectId']))),
  );
  router.post('/v1/projects/:projectId/resume', auth, (req, res) =>
    answer(res, logger, () => admin.resumeProject(param(req.params['projectId']))),
  );
  router.post('/v1/projects/:projectId/unpark', auth, (req, res) =>
    answer(res, logger, () => admin.unparkProject(param(req.params['projectId']))),
  );
  router.put(
    '/v1/projects/:projectId/limit',
    auth,
    requireJson,
    express.json({ limit: 4096, strict: false }),
    (req, res) => {
      const body: unknown = req.body;
      const projectId = param(req.params['projectId']);
      if (typeof body !== 'object' || body === null || Array.isArray(body) || !('limit' in body))
        return sendProblem(
          res,
          new InvalidControlError('limit', 'expected a body {"limit": "50/1h"} or {"limit": null}'),
        );
      const { limit, force } = body as { limit: unknown; force?: unknown };
      if (force !== undefined && typeof force !== 'boolean')
        return sendProblem(res, new InvalidControlError('force', 'expected true or false'));
      return answer(res, logger, () =>
        limit === null
          ? admin.clearProjectLimit(projectId)
          : admin.setProjectLimit(projectId, limit as string, { force: force === true }),
      );
    },
  );
  router.get('/v1/projects/:projectId', auth, (req, res) =>
    answer(res, logger, () => admin.showProject(param(req.params['projectId']))),
  );
  return router;
}

/** The largest body of `POST /v1/redrive`: a thousand dispatch ids of the longest. */
const REDRIVE_BODY_MAX = 256 * 1024;

/** One answer of a redrive as JSON: a refusal as `{dispatchId, error, why}`, as the CLI prints it. */
function redriveJson(answer: RedriveOutcome): object {
  if (!(answer instanceof NotRedrivableError)) return answer;
  return { dispatchId: answer.dispatchId, error: answer.message, why: answer.why };
}

/** Runs a control: 200 with its answer, or its failure mapped to a status. */
async function answer(res: Response, logger: Logger, call: () => Promise<object>): Promise<void> {
  // Never sent: a control always answers an object (an unknown follow-up's 404 is its error's).
  await answerCall(res, call, {
    status: 200,
    notFound: 'not found',
    failure: (err) => answerFailure(res, logger, err),
  });
}

function sendProblem(res: Response, { code, field, problem }: InvalidControlError): void {
  sendError(res, 400, `invalid ${field}`, { code, problems: [{ field, message: problem }] });
}

/**
 * Bad input 400 naming the field, an unknown follow-up 404, one past `queued` 409 with its state,
 * a `DISPATCH_SHARDS` the fleet's record contradicts 500 naming it, Redis unreachable 503;
 * anything else a logged 500.
 */
function answerFailure(res: Response, logger: Logger, err: unknown): void {
  if (err instanceof InvalidControlError) return sendProblem(res, err);
  if (err instanceof UnknownDispatchError)
    return sendError(res, 404, err.message, { code: err.code, dispatchId: err.dispatchId });
  if (err instanceof NotRedrivableError)
    return sendError(res, err.why === 'unknown' ? 404 : 409, err.message, {
      code: err.code,
      dispatchId: err.dispatchId,
      why: err.why,
    });
  if (err instanceof NotCancellableError)
    return sendError(res, 409, err.message, {
      code: err.code,
      dispatchId: err.dispatchId,
      state: err.state,
    });
  if (err instanceof LayoutError) {
    // The server's own setting disagrees with the fleet's record: nothing a caller can fix.
    logger.error({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeError);
    return sendError(res, 500, err.message, { code: err.code, setting: err.setting });
  }
  if (err instanceof NotDurableError) {
    // A strict REDIS_DURABILITY this server cannot keep: refused before anything was written.
    logger.warn({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeUnavailable);
    return sendError(res, 503, `${err.message}; nothing changed`, { code: err.code });
  }
  if (err instanceof RedisUnavailableError) {
    logger.warn({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeUnavailable);
    res.set('retry-after', '5');
    return sendError(res, 503, 'Redis is unavailable; nothing changed, retry later', {
      code: err.code,
    });
  }
  if (err instanceof RedisCommandError) {
    // Redis's configuration or state (a memory limit, a failed save), not this request.
    logger.error({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeError);
    return sendError(res, 503, 'Redis refused the call; see the server log, then retry', {
      code: err.code,
    });
  }
  logger.error({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.intakeError);
  sendError(res, 500, 'internal error; see the server log');
}
