import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import { Router, type RequestHandler } from 'express';
import { dashboardScopes, secretsEqual, sessionCookie } from './auth.js';
import type { ScopeTokens } from '../config/index.js';
import type { Admin } from '../producer/index.js';
import type { ShardView } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import { sendError } from './errors.js';
import { followupsRouter } from './followups.js';
import { grantedScopes, grantScopes } from './scopes.js';

/** Where the dashboard is served. */
export const DASHBOARD_PATH = '/dashboard';

/**
 * What the dashboard needs. Without a dashboard or operator token it is off and says how to turn
 * it on.
 */
export interface DashboardOptions {
  /** A `DASHBOARD_TOKEN` sees the pages; an `OPERATOR_TOKEN` may also press their buttons. */
  readonly tokens: ScopeTokens;
  /** Every shard, with its queues: each queue is listed as {@link boardQueues} names it. */
  readonly shards: readonly ShardView[];
  /**
   * Lets the dashboard retry failed jobs and promote delayed ones; otherwise it is read-only. No
   * other change is ever allowed: see {@link allowedWrite}.
   */
  readonly allowRetries: boolean;
  /** The follow-ups page's data and actions. */
  readonly admin: Admin;
  /** Pause, resume and cancel buttons on the follow-ups page (`DASHBOARD_ALLOW_CONTROLS`). */
  readonly allowControls: boolean;
  readonly logger: Logger;
}

/**
 * bull-board under {@link DASHBOARD_PATH}, and the follow-ups page beside it
 * (`/dashboard/followups`), behind the dashboard token.
 */
export function dashboardRouter(options: DashboardOptions): Router {
  const router = Router();
  const { tokens } = options;
  if (tokens.dashboard.length === 0 && tokens.operator.length === 0) {
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
    queues: boardQueues(options.shards).map(
      ({ prefix, queue, description }) =>
        new BullMQAdapter(queue, {
          readOnlyMode: !options.allowRetries,
          allowRetries: options.allowRetries,
          prefix,
          description,
        }),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'agent-dispatch' } },
  });
  router.use(
    DASHBOARD_PATH,
    requireDashboardToken(tokens),
    refuseCrossSite,
    writesNeedOperator,
    followupsRouter({
      admin: options.admin,
      basePath: DASHBOARD_PATH,
      allowControls: options.allowControls,
      logger: options.logger,
    }),
    guardWrites(options),
    serverAdapter.getRouter() as RequestHandler,
  );
  return router;
}

/** A queue as bull-board lists it: `name` is `prefix` + the queue's own name. */
interface BoardQueue {
  readonly name: string;
  readonly prefix: string;
  readonly description: string;
  readonly queue: Queue;
}

/**
 * The queues bull-board lists. With one shard each keeps its own name (`dispatch`, `poll`); with
 * several each shard's are named after it (`shard 3: dispatch`), described by their Redis prefix
 * (the shard's hash tag), since every shard's queues have the same BullMQ names.
 */
function boardQueues(shards: readonly ShardView[]): BoardQueue[] {
  return shards.flatMap((shard) =>
    shard.queues.map((queue) => {
      const prefix = shards.length > 1 ? `${shard.name}: ` : '';
      const description = shards.length > 1 ? `keys under ${shard.keys.prefix}` : '';
      return { name: `${prefix}${queue.name}`, prefix, description, queue };
    }),
  );
}

/**
 * Lets a request through when it carries a dashboard or operator token (bearer, Basic password,
 * or the session cookie), and records which scopes it has. `?token=` sets the cookie and
 * redirects to the same page without the token, so the link that `start` prints works once and
 * the token does not linger in the address bar or history. Anything else gets a 401 with a Basic
 * challenge, so a browser asks for the password.
 */
function requireDashboardToken(tokens: ScopeTokens): RequestHandler {
  const loginTokens = [...tokens.dashboard, ...tokens.operator];
  return (req, res, next) => {
    const query = typeof req.query['token'] === 'string' ? req.query['token'] : undefined;
    // Every entry is compared, so the time taken does not tell which one matched.
    let matched: string | undefined;
    for (const token of loginTokens)
      if (query !== undefined && secretsEqual(query, token)) matched ??= token;
    if (matched !== undefined) {
      res.set('set-cookie', sessionCookie(matched, DASHBOARD_PATH, req.secure));
      res.set('cache-control', 'no-store').redirect(303, sameDashboardPage(req.originalUrl));
      return;
    }
    const granted = dashboardScopes(req, tokens);
    if (granted.size > 0) {
      grantScopes(res, granted);
      res.set('referrer-policy', 'no-referrer');
      next();
      return;
    }
    res.set('www-authenticate', 'Basic realm="agent-dispatch", charset="UTF-8"');
    sendError(
      res,
      401,
      'the dashboard needs DASHBOARD_TOKEN (or OPERATOR_TOKEN): as a bearer token, the Basic auth password, or ?token=',
    );
  };
}

/** Only an operator token may change anything from the pages; a dashboard token only looks. */
const writesNeedOperator: RequestHandler = (req, res, next) => {
  if (['GET', 'HEAD', 'OPTIONS'].includes(req.method)) return next();
  if (grantedScopes(res).has('operator')) return next();
  sendError(res, 403, 'this action needs the operator scope (a token of OPERATOR_TOKEN)', {
    code: 'forbidden',
    scope: 'operator',
  });
};

/**
 * The page a `?token=` link asked for, without the token, as a path under {@link DASHBOARD_PATH}.
 * The URL parser resolves dot segments, so `/dashboard/..//evil.example` would become
 * `//evil.example`, which a browser reads as another host: anything that leaves the dashboard's
 * path goes to the dashboard's front page instead.
 */
function sameDashboardPage(originalUrl: string): string {
  const url = new URL(originalUrl, 'http://localhost');
  url.searchParams.delete('token');
  const inside = url.pathname === DASHBOARD_PATH || url.pathname.startsWith(`${DASHBOARD_PATH}/`);
  return inside ? `${url.pathname}${url.search}` : DASHBOARD_PATH;
}

/**
 * bull-board's write routes (9.10) include emptying, cleaning, obliterating and pausing a queue,
 * removing a job, editing its data or delay, and adding jobs. Any of them would leave a dispatch
 * record `queued` with no BullMQ job, its lane blocked for good; so the only writes let through
 * are a retry of failed jobs and a promotion of delayed ones, whatever the setting says, and only
 * in the exact form bull-board's UI sends (express matches routes case-insensitively, with or
 * without a trailing slash: anything else is refused rather than guessed at).
 */
function guardWrites(options: DashboardOptions): RequestHandler {
  return (req, res, next) => {
    if (['GET', 'HEAD', 'OPTIONS'].includes(req.method)) return next();
    if (!options.allowRetries) {
      return sendError(res, 405, 'the dashboard is read-only (DASHBOARD_ALLOW_RETRIES)');
    }
    allowedWrite(req.method, req.path, boardQueues(options.shards)).then(
      (allowed) =>
        allowed
          ? next()
          : sendError(res, 403, 'the dashboard only retries failed jobs and promotes delayed jobs'),
      next,
    );
  };
}

const RETRY_ALL_FAILED = /^\/api\/queues\/([^/]+)\/retry\/failed$/;
const PROMOTE_ALL_DELAYED = /^\/api\/queues\/([^/]+)\/promote$/;
const ONE_JOB = /^\/api\/queues\/([^/]+)\/([^/]+)\/(retry|promote)$/;

/** Whether a write is a retry of failed jobs or a promotion of delayed ones; see {@link guardWrites}. */
async function allowedWrite(
  method: string,
  path: string,
  queues: readonly BoardQueue[],
): Promise<boolean> {
  if (method !== 'PUT') return false;
  const queueNamed = (encoded: string | undefined) =>
    queues.find((q) => q.name === decodeSegment(encoded))?.queue;
  const all = RETRY_ALL_FAILED.exec(path) ?? PROMOTE_ALL_DELAYED.exec(path);
  if (all) return queueNamed(all[1]) !== undefined;
  const one = ONE_JOB.exec(path);
  const queue = queueNamed(one?.[1]);
  const jobId = decodeSegment(one?.[2]);
  if (!one || !queue || jobId === undefined) return false;
  const job = await queue.getJob(jobId);
  const state = job ? await job.getState() : undefined;
  return state === (one[3] === 'retry' ? 'failed' : 'delayed');
}

/** A path segment, decoded; undefined when it is missing or not valid percent-encoding. */
function decodeSegment(segment: string | undefined): string | undefined {
  try {
    return segment === undefined ? undefined : decodeURIComponent(segment);
  } catch {
    return undefined;
  }
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
