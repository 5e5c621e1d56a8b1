import { Router, type Request, type Response } from 'express';
import {
  InvalidControlError,
  NotCancellableError,
  NotRedrivableError,
  UnknownDispatchError,
  type Admin,
} from '../producer/index.js';
import { LayoutError } from '../redis/layout.js';
import { within } from '../time/deadline.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { sendError } from './errors.js';
import { renderFollowup, renderMissing, renderSearch } from './followup-page.js';
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

  /** Answers `render`'s page, or the error of a Redis that fails or does not answer in time. */
  const page =
    (render: (req: Request, res: Response) => Promise<[number, string] | undefined>) =>
    async (req: Request, res: Response) => {
      try {
        const answer = await within(render(req, res), REDIS_TIMEOUT_MS, () => {
          throw new Error(`no answer from Redis within ${REDIS_TIMEOUT_MS} ms`);
        });
        if (!answer) return;
        res.status(answer[0]).set({ 'content-security-policy': CSP, 'cache-control': 'no-store' });
        res.type('html').send(answer[1]);
      } catch (err) {
        logger.warn({ err, path: req.path }, LIFECYCLE.httpError);
        if (err instanceof LayoutError)
          return sendError(res, 500, err.message, { code: err.code, setting: err.setting });
        sendError(res, 503, 'the follow-ups page could not read Redis; retry later');
      }
    };
  // The buttons only for a token that may press them (an operator's).
  const controlsFor = (res: Response) => allowControls && grantedScopes(res).has('operator');

  router.get(
    FOLLOWUPS_PAGE,
    page(async (req, res) => {
      const q = req.query['q'];
      if (typeof q === 'string') {
        const found = await admin.search(q);
        const [only] = found;
        if (found.length === 1 && only !== undefined) {
          res.set('cache-control', 'no-store').redirect(303, `${path}/${encodeURIComponent(only)}`);
          return undefined;
        }
        return [200, renderSearch(q, found, path)];
      }
      const projectsPage = Math.max(0, Math.floor(Number(req.query['projects'] ?? 0)) || 0);
      const overview = await admin.overview({ projectsPage });
      const html = renderPage(overview, {
        path,
        queuesPath: basePath,
        controls: controlsFor(res),
        notice: noticeOf(req),
      });
      return [200, html];
    }),
  );

  router.get(
    `${FOLLOWUPS_PAGE}/:dispatchId`,
    page(async (req, res) => {
      const dispatchId = String(req.params['dispatchId']);
      const detail = await admin.followUp(dispatchId).catch((err: unknown) => {
        if (err instanceof InvalidControlError) return null;
        throw err;
      });
      if (!detail) return [404, renderMissing(dispatchId, path)];
      const controls = controlsFor(res);
      return [200, renderFollowup(detail, { path, controls, notice: noticeOf(req) })];
    }),
  );

  router.post(`${FOLLOWUPS_PAGE}/:dispatchId/redrive`, async (req, res) => {
    if (!allowControls)
      return sendError(res, 405, 'the follow-ups page is read-only (DASHBOARD_ALLOW_CONTROLS)');
    const dispatchId = String(req.params['dispatchId']);
    let to = `${path}/${encodeURIComponent(dispatchId)}`;
    let query: Record<string, NoticeCode>;
    try {
      const r = await admin.redrive(dispatchId);
      to = `${path}/${encodeURIComponent(r.redrivenTo)}`;
      query = { done: r.created ? 'redriven' : 'already-redriven' };
    } catch (err) {
      if (!(err instanceof NotRedrivableError) && !(err instanceof InvalidControlError))
        logger.warn({ err, path: req.path }, LIFECYCLE.httpError);
      query = { failed: failureCode(err) };
    }
    res
      .set('cache-control', 'no-store')
      .redirect(303, `${to}?${new URLSearchParams(query).toString()}`);
  });

  const act =
    (run: (req: Request) => Promise<NoticeCode>) => async (req: Request, res: Response) => {
      if (!allowControls)
        return sendError(res, 405, 'the follow-ups page is read-only (DASHBOARD_ALLOW_CONTROLS)');
      let query: Record<string, NoticeCode>;
      try {
        query = { done: await run(req) };
      } catch (err) {
        if (
          !(err instanceof InvalidControlError) &&
          !(err instanceof NotCancellableError) &&
          !(err instanceof UnknownDispatchError)
        )
          logger.warn({ err, path: req.path }, LIFECYCLE.httpError);
        query = { failed: failureCode(err) };
      }
      const search = new URLSearchParams(query);
      res.set('cache-control', 'no-store').redirect(303, `${path}?${search.toString()}`);
    };
  const param = (req: Request, name: string) => String(req.params[name]);
  router.post(
    `${FOLLOWUPS_PAGE}/projects/:projectId/pause`,
    act(async (req) => {
      const r = await admin.pauseProject(param(req, 'projectId'));
      return r.changed ? 'paused' : 'already-paused';
    }),
  );
  router.post(
    `${FOLLOWUPS_PAGE}/projects/:projectId/resume`,
    act(async (req) => {
      const r = await admin.resumeProject(param(req, 'projectId'));
      return r.changed ? 'resumed' : 'not-paused';
    }),
  );
  router.post(
    `${FOLLOWUPS_PAGE}/cancel/:dispatchId`,
    act(async (req) => {
      await admin.cancel(param(req, 'dispatchId'));
      return 'cancelled';
    }),
  );
  return router;
}

/**
 * What an action's redirect may say, each a fixed text of the service's own. The query carries
 * only the code: a link that anyone can write (`?failed=Your session expired, call...`) must not
 * put its words on the operator's page.
 */
const NOTICES = {
  paused: [true, 'Project paused.'],
  'already-paused': [true, 'The project was already paused.'],
  resumed: [true, 'Project resumed; its queued follow-ups were woken.'],
  'not-paused': [true, 'The project was not paused.'],
  cancelled: [true, 'Follow-up cancelled.'],
  redriven: [true, 'Redriven: this is the new follow-up that sends the dead letter again.'],
  'already-redriven': [true, 'It was redriven before: this is the follow-up that redrove it.'],
  'not-redrivable': [
    false,
    'Only a follow-up that ended undeliverable or timed out, with its prompt still kept, can be redriven; nothing changed.',
  ],
  invalid: [false, 'That value was refused; nothing changed.'],
  'not-cancellable': [false, 'That follow-up is being sent or has ended; it cannot be cancelled.'],
  'unknown-dispatch': [false, 'No such follow-up (unknown, or expired after DISPATCH_RETENTION).'],
  layout: [
    false,
    "This server's DISPATCH_SHARDS differs from the fleet's; nothing changed, see the server log.",
  ],
  unavailable: [
    false,
    'The action failed (Redis unavailable?); nothing may have changed, see the server log.',
  ],
} as const satisfies Record<string, readonly [boolean, string]>;

type NoticeCode = keyof typeof NOTICES;

/** The outcome of the last action: the fixed text of the redirect's code; nothing for another. */
function noticeOf(req: Request): { ok: boolean; text: string } | undefined {
  const code = req.query['done'] ?? req.query['failed'];
  if (typeof code !== 'string' || !Object.hasOwn(NOTICES, code)) return undefined;
  const [ok, text] = NOTICES[code as NoticeCode];
  return { ok, text };
}

function failureCode(err: unknown): NoticeCode {
  if (err instanceof LayoutError) return 'layout';
  if (err instanceof InvalidControlError) return 'invalid';
  if (err instanceof NotCancellableError) return 'not-cancellable';
  if (err instanceof UnknownDispatchError) return 'unknown-dispatch';
  if (err instanceof NotRedrivableError)
    return err.why === 'unknown' ? 'unknown-dispatch' : 'not-redrivable';
  return 'unavailable';
}
