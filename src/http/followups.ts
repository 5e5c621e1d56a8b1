import { Router, type Request, type Response } from 'express';
import {
  InvalidControlError,
  NotCancellableError,
  UnknownDispatchError,
  type Admin,
} from '../producer/index.js';
import { within } from '../runtime/deadline.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { sendError } from './errors.js';
import { renderPage } from './followups-page.js';
import { grantedScopes } from './scopes.js';

/**
 * `/dashboard/followups`, beside bull-board and behind the same token: what an operator asks
 * about (projects paused, parked, out of budget; the tracked follow-ups; the last events), and
 * with `DASHBOARD_ALLOW_CONTROLS` the pause, resume and cancel buttons, which call the same code
 * as the CLI (`createAdmin`). Each action answers with a redirect to the page (post/redirect/get),
 * its outcome shown once.
 */

/** Under the dashboard's path. */
export const FOLLOWUPS_PAGE = '/followups';

/** Longest wait for Redis before the page answers 503. */
const REDIS_TIMEOUT_MS = 5_000;

/** No script, no frame, forms to this origin only. */
const CSP =
  "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** What the page needs. */
export interface FollowupsPageOptions {
  readonly admin: Admin;
  /** The dashboard's path (`/dashboard`). */
  readonly basePath: string;
  readonly allowControls: boolean;
  readonly logger: Logger;
}

/** The page and its actions, to mount under the dashboard's path after its auth. */
export function followupsRouter(options: FollowupsPageOptions): Router {
  const router = Router();
  const { admin, basePath, allowControls, logger } = options;
  const path = `${basePath}${FOLLOWUPS_PAGE}`;

  router.get(FOLLOWUPS_PAGE, async (req, res) => {
    try {
      const overview = await within(admin.overview(), REDIS_TIMEOUT_MS, () => {
        throw new Error(`no answer from Redis within ${REDIS_TIMEOUT_MS} ms`);
      });
      const html = renderPage(overview, {
        path,
        queuesPath: basePath,
        // The buttons only for a token that may press them (an operator's).
        controls: allowControls && grantedScopes(res).has('operator'),
        notice: noticeOf(req),
      });
      res.status(200).set({ 'content-security-policy': CSP, 'cache-control': 'no-store' });
      res.type('html').send(html);
    } catch (err) {
      logger.warn({ err, path: req.path }, LIFECYCLE.httpError);
      sendError(res, 503, 'the follow-ups page could not read Redis; retry later');
    }
  });

  const act = (run: (req: Request) => Promise<string>) => async (req: Request, res: Response) => {
    if (!allowControls)
      return sendError(res, 405, 'the follow-ups page is read-only (DASHBOARD_ALLOW_CONTROLS)');
    let notice: { ok: boolean; text: string };
    try {
      notice = { ok: true, text: await run(req) };
    } catch (err) {
      if (
        !(err instanceof InvalidControlError) &&
        !(err instanceof NotCancellableError) &&
        !(err instanceof UnknownDispatchError)
      )
        logger.warn({ err, path: req.path }, LIFECYCLE.httpError);
      notice = { ok: false, text: failureText(err) };
    }
    const query = new URLSearchParams({ [notice.ok ? 'done' : 'failed']: notice.text });
    res.set('cache-control', 'no-store').redirect(303, `${path}?${query.toString()}`);
  };
  const param = (req: Request, name: string) => String(req.params[name]);
  router.post(
    `${FOLLOWUPS_PAGE}/projects/:projectId/pause`,
    act(async (req) => {
      const r = await admin.pauseProject(param(req, 'projectId'));
      return `${r.projectId} paused${r.changed ? '' : ' (it already was)'}`;
    }),
  );
  router.post(
    `${FOLLOWUPS_PAGE}/projects/:projectId/resume`,
    act(async (req) => {
      const r = await admin.resumeProject(param(req, 'projectId'));
      return `${r.projectId} resumed, ${r.woken} follow-ups woken${r.changed ? '' : ' (it was not paused)'}`;
    }),
  );
  router.post(
    `${FOLLOWUPS_PAGE}/cancel/:dispatchId`,
    act(async (req) => {
      const r = await admin.cancel(param(req, 'dispatchId'));
      return `${r.dispatchId} cancelled: ${r.type}`;
    }),
  );
  return router;
}

/** The outcome of the last action, from the redirect's query; the page escapes it. */
function noticeOf(req: Request): { ok: boolean; text: string } | undefined {
  const done = req.query['done'];
  const failed = req.query['failed'];
  if (typeof done === 'string') return { ok: true, text: done.slice(0, 300) };
  if (typeof failed === 'string') return { ok: false, text: failed.slice(0, 300) };
  return undefined;
}

function failureText(err: unknown): string {
  if (
    err instanceof InvalidControlError ||
    err instanceof NotCancellableError ||
    err instanceof UnknownDispatchError
  )
    return err.message;
  return 'the action failed (Redis unavailable?); nothing may have changed, see the server log';
}
