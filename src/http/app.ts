import { createRequire } from 'node:module';
import express, { type Express, type RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import type { Admin, Producer } from '../producer/index.js';
import { assessOnce } from '../redis/durability.js';
import type { ShardView } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { controlsRouter } from './controls.js';
import { dashboardRouter } from './dashboard.js';
import { errorHandler, notFound } from './errors.js';
import type { EventFeed } from './event-feed.js';
import { eventsRouter } from './events.js';
import { healthRouter, type SendPauseCheck } from './health.js';
import { intakeBodyLimitBytes, intakeRouter } from './intake.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { webhooksRouter } from './webhooks.js';
import { installScopes, requireListedToken } from './scopes.js';
import { createBodyBudget } from './body-budget.js';
import { describeCoreRoutes } from './api-routes.js';
import { openApiRouter } from './openapi.js';

/** The package's version, for the OpenAPI document (`src/` and `dist/` are both two levels down). */
const PACKAGE_VERSION = (
  createRequire(import.meta.url)('../../package.json') as { version: string }
).version;

/** Everything the routes need. */
export interface AppOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** A fail-fast connection for `/readyz`. */
  readonly readinessRedis: Redis;
  /** Every shard, with the queues the dashboard shows. */
  readonly shards: readonly ShardView[];
  readonly producer: Producer | undefined;
  /** The operator controls: the HTTP routes and the dashboard's buttons. */
  readonly admin: Admin;
  readonly roles: () => readonly { name: string; running: boolean }[];
  /** The process's Redis connection (the webhook routes use it); `/readyz`'s by default. */
  readonly redis?: Redis;
  /** See `ReadinessSource.sendPauses`. */
  readonly sendPauses?: readonly SendPauseCheck[] | undefined;
  /** What `/v1/events` and `/v1/events/stream` read; without it they answer 404. */
  readonly events?: EventFeed | undefined;
}

/** The express app: health, metrics, intake, dashboard, then JSON 404 and error answers. */
export function createApp(options: AppOptions): Express {
  const { config, logger, metrics } = options;
  const bodyLimitBytes = intakeBodyLimitBytes(config.promptMaxBytes, config.httpBodyMaxBytes);
  const bodies = createBodyBudget({
    maxBytes: config.httpBodyMaxBytes,
    inflightMaxBytes: config.httpBodyInflightMaxBytes,
  });
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  installScopes(app, config.tokens);
  describeCoreRoutes(config.promptMaxBytes);
  app.use(requestLog(logger));
  app.use((_req, res, next) => {
    res.set('x-content-type-options', 'nosniff');
    next();
  });
  app.use(
    healthRouter({
      redis: options.readinessRedis,
      roles: options.roles,
      sendPauses: options.sendPauses,
      durability: async () => {
        if (!config.redisUrl) return 'unknown';
        const redis = options.readinessRedis;
        return (await assessOnce(config.redisUrl, config.durability, redis)).mode;
      },
    }),
  );
  app.use(openApiRouter(PACKAGE_VERSION));
  app.get(
    '/metrics',
    requireListedToken(config.metricsTokens, 'METRICS_TOKEN'),
    async (_req, res) => {
      const text = await metrics.registry.metrics();
      res.set('content-type', metrics.registry.contentType).send(text);
    },
  );
  app.use(intakeRouter({ producer: options.producer, bodyLimitBytes, bodies, logger }));
  app.use(eventsRouter({ feed: options.events, logger }));
  app.use(controlsRouter({ admin: options.admin, logger }));
  app.use(webhooksRouter({ config, redis: options.redis ?? options.readinessRedis, logger }));
  app.use(
    dashboardRouter({
      tokens: config.tokens,
      shards: options.shards,
      allowRetries: config.dashboardAllowRetries,
      admin: options.admin,
      allowControls: config.dashboardAllowControls,
      logger,
    }),
  );
  app.use(notFound);
  app.use(errorHandler(logger, bodyLimitBytes));
  return app;
}

/**
 * Logs each request once it is answered, at debug. Only the path is logged: a query string may
 * hold the dashboard token, and headers are left out entirely (the Authorization header above all).
 */
function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    if (!logger.isLevelEnabled('debug')) return next();
    // Read now: mounted routers rewrite req.url while they handle the request.
    const { method, path } = req;
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
      logger.debug({ method, path, status: res.statusCode, durationMs }, LIFECYCLE.httpRequest);
    });
    next();
  };
}
