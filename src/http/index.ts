/**
 * The HTTP server of agent-dispatch: the bull-board dashboard, Prometheus metrics, health and
 * readiness probes, and the follow-up intake.
 */
export { startHttpServer, type HttpServer, type HttpServerOptions } from './server.js';
export { DASHBOARD_PATH } from './dashboard.js';
export type { SendPauseCheck } from './health.js';
export { MAX_BATCH, intakeBodyLimitBytes } from './intake.js';
