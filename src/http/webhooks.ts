import express, { Router, type Response } from 'express';
import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import { RedisUnavailableError } from '../producer/index.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { InvalidWebhookError, webhookAdminFor, type WebhookAdmin } from '../webhooks/index.js';
import { answerCall, sendError } from './errors.js';
import { requireJson } from './intake.js';
import { requireScope } from './scopes.js';

/**
 * `/v1/webhooks`: the webhook subscriptions and their dead letters over HTTP, the same code as the
 * CLI's `webhook` command. `POST` adds one (201, with its secret, shown this once), `GET` lists
 * them (never a secret), `DELETE /v1/webhooks/:id` removes one; `GET /v1/webhooks/dead` lists the
 * dead letters and `POST /v1/webhooks/redrive` queues them again.
 */

/** What the routes need. */
export interface WebhookRoutesOptions {
  readonly config: Config;
  readonly redis: Redis;
  readonly logger: Logger;
}

/** The `/v1/webhooks` routes, for the operator's token (`OPERATOR_TOKEN`). */
export function webhooksRouter(options: WebhookRoutesOptions): Router {
  const router = Router();
  const auth = requireScope('operator');
  const admin = webhookAdminFor(options.config, options.redis);
  const json = [requireJson, express.json({ limit: 16_384, strict: false })];
  const run = (
    res: Response,
    status: number,
    call: (a: WebhookAdmin) => Promise<object | undefined>,
  ) => answer(res, status, options.logger, () => call(admin));
  router.post('/v1/webhooks', auth, ...json, (req, res) =>
    run(res, 201, (a) => a.add(objectOf(req.body))),
  );
  router.get('/v1/webhooks', auth, (_req, res) =>
    run(res, 200, async (a) => ({ webhooks: await a.list() })),
  );
  router.get('/v1/webhooks/dead', auth, (req, res) => {
    const limit = Number(req.query['limit'] ?? 1000);
    if (!Number.isInteger(limit) || limit < 1)
      return sendError(res, 400, 'invalid limit', {
        problems: [{ field: 'limit', message: 'expected a whole number from 1' }],
      });
    return run(res, 200, async (a) => ({ dead: await a.dead(limit) }));
  });
  router.post('/v1/webhooks/redrive', auth, (req, res) => {
    const only = req.query['subscription'];
    return run(res, 200, (a) => a.redrive(typeof only === 'string' ? only : undefined));
  });
  router.delete('/v1/webhooks/:id', auth, (req, res) => {
    const id = String(req.params['id']);
    return run(res, 200, async (a) => ((await a.remove(id)) ? { id, removed: true } : undefined));
  });
  return router;
}

function objectOf(body: unknown): { url: unknown; projects?: unknown; types?: unknown } {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new InvalidWebhookError(
      '(body)',
      'expected {"url": "https://...", "projects": [...], "types": [...]}',
    );
  return body as { url: unknown };
}

/** Runs a control: `status` with its answer, 404 for `undefined`, or its failure mapped. */
async function answer(
  res: Response,
  status: number,
  logger: Logger,
  call: () => Promise<object | undefined>,
): Promise<void> {
  await answerCall(res, call, {
    status,
    notFound: 'no such webhook subscription',
    failure: (err) => answerFailure(res, logger, err),
  });
}

/** Bad input 400 naming the field, Redis unreachable 503, anything else a logged 500. */
function answerFailure(res: Response, logger: Logger, err: unknown): void {
  if (err instanceof InvalidWebhookError)
    return sendError(res, 400, `invalid ${err.field}`, {
      code: err.code,
      problems: [{ field: err.field, message: err.problem }],
    });
  if (err instanceof RedisUnavailableError) {
    res.set('retry-after', '5');
    return sendError(res, 503, 'Redis is unavailable; nothing changed, retry later', {
      code: err.code,
    });
  }
  logger.error({ err, method: res.req.method, path: res.req.path }, LIFECYCLE.httpError);
  sendError(res, 500, 'internal error; see the server log');
}
