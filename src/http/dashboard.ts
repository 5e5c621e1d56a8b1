import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import { Router, type RequestHandler } from 'express';
import { presentsDashboardToken, secretsEqual, sessionCookie } from './auth.js';
import { sendError } from './errors.js';

/** Where the dashboard is served. */
export const DASHBOARD_PATH = '/dashboard';

/** What the dashboard needs. Without a token it is off and says how to turn it on. */
export interface DashboardOptions {
  readonly token: string | undefined;
  readonly queues: readonly Queue[];
  /** Lets the dashboard retry, promote and remove jobs; otherwise it is read-only. */
  readonly allowRetries: boolean;
}

/** bull-board under {@link DASHBOARD_PATH}, behind the dashboard token. */
export function dashboardRouter(options: DashboardOptions): Router {
  const router = Router();
  const { token } = options;
  if (!token) {
    router.use(DASHBOARD_PATH, (_req, res) => {
      sendError(
        res,
        404,
        'the dashboard is off: set DASHBOARD_TOKEN (agent-dispatch start makes one)',
      );
    });
    return router;
  }
  const serverAdapter = new ExpressAdapter().setBasePath(DASHBOARD_PATH);
  createBullBoard({
    queues: options.queues.map(
      (queue) =>
        new BullMQAdapter(queue, {
          readOnlyMode: !options.allowRetries,
          allowRetries: options.allowRetries,
        }),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'agent-dispatch' } },
  });
  router.use(
    DASHBOARD_PATH,
    requireDashboardToken(token),
    refuseCrossSite,
    serverAdapter.getRouter() as RequestHandler,
  );
  return router;
}

/**
 * Lets a request through when it carries the token (bearer, Basic password, or the session
 * cookie). `?token=` sets the cookie and redirects to the same page without the token, so the
 * link that `start` prints works once and the token does not linger in the address bar or history.
 * Anything else gets a 401 with a Basic challenge, so a browser asks for the password.
 */
function requireDashboardToken(token: string): RequestHandler {
  return (req, res, next) => {
    const query = typeof req.query['token'] === 'string' ? req.query['token'] : undefined;
    if (query !== undefined && secretsEqual(query, token)) {
      const url = new URL(req.originalUrl, 'http://localhost');
      url.searchParams.delete('token');
      res.set('set-cookie', sessionCookie(token, DASHBOARD_PATH, req.secure));
      res.set('cache-control', 'no-store').redirect(303, `${url.pathname}${url.search}`);
      return;
    }
    if (presentsDashboardToken(req, token)) {
      res.set('referrer-policy', 'no-referrer');
      next();
      return;
    }
    res.set('www-authenticate', 'Basic realm="agent-dispatch", charset="UTF-8"');
    sendError(
      res,
      401,
      'the dashboard needs DASHBOARD_TOKEN: as a bearer token, the Basic auth password, or ?token=',
    );
  };
}

/**
 * Browsers attach remembered Basic credentials to cross-site requests too, so a page elsewhere
 * could make a logged-in operator's browser retry or remove jobs. Changes must come from the
 * dashboard's own pages (or from a script, which sends neither header).
 */
const refuseCrossSite: RequestHandler = (req, res, next) => {
  if (['GET', 'HEAD', 'OPTIONS'].includes(req.method)) return next();
  // Every current browser sends Sec-Fetch-Site; Origin is the fallback for older ones. A proxy may
  // rewrite Host, which is why Origin is not compared when Sec-Fetch-Site is there.
  const site = req.get('sec-fetch-site');
  const origin = req.get('origin');
  const crossSite =
    site !== undefined
      ? site !== 'same-origin' && site !== 'none'
      : origin !== undefined && safeHost(origin) !== req.get('host');
  if (crossSite)
    return sendError(res, 403, 'the dashboard accepts changes from its own pages only');
  next();
};

function safeHost(origin: string): string | undefined {
  return URL.canParse(origin) ? new URL(origin).host : undefined;
}
