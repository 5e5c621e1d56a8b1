import { clearTextApiHost, type Config } from '../config/index.js';
import { startHttpServer } from '../http/index.js';
import { connect } from '../redis/connections.js';
import { keysFor } from '../redis/keys.js';
import { untilAborted } from '../runtime/deadline.js';
import type { Role } from '../runtime/role.js';
import { createLogger, logFormatFor, type Logger } from '../telemetry/logger.js';
import { createMetrics, type Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { EXIT, type CommandContext } from './command.js';

/** What the roles of one process share. */
export interface RoleKit {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/** Builds the logger and metrics of a role process. */
export function roleKit(config: Config): RoleKit {
  return {
    config,
    logger: createLogger(config.logLevel, undefined, logFormatFor(config.logFormat, false)),
    metrics: createMetrics(),
  };
}

/**
 * Logs one warning when the roles of this process would send the API key over plain `http://` to
 * a host that is not loopback. Called once per process by the commands whose roles call the API.
 */
export function warnIfClearTextKey(kit: RoleKit): void {
  const host = clearTextApiHost(kit.config.agentApiUrl);
  if (host === undefined) return;
  kit.logger.warn({ setting: 'AGENT_API_URL', host }, LIFECYCLE.configClearTextKey);
}

/**
 * Runs started roles until the first SIGTERM/SIGINT, then closes them all, in reverse order of
 * start, each even if one before it failed, and resolves to the exit code.
 */
export async function runUntilSignal(
  ctx: CommandContext,
  kit: RoleKit,
  started: readonly Role[],
): Promise<number> {
  const roles = [...started];
  if (kit.config.metricsPort !== undefined) roles.push(await metricsServer(kit, started));
  await untilAborted(ctx.signal);
  kit.logger.info({ roles: roles.map((r) => r.name) }, LIFECYCLE.roleStopping);
  let failed = 0;
  for (const role of [...roles].reverse()) {
    try {
      await role.close();
    } catch (err) {
      failed++;
      kit.logger.error({ err, role: role.name }, LIFECYCLE.roleStopped);
    }
  }
  kit.logger.flush();
  return failed > 0 ? EXIT.failed : EXIT.ok;
}

/**
 * The HTTP server of a worker or poller process on `METRICS_PORT`: /metrics, /healthz and
 * /readyz only (no dashboard, no intake), so each process of a fleet can be scraped and probed.
 */
async function metricsServer(kit: RoleKit, roles: readonly Role[]): Promise<Role> {
  const redis = connect(kit.config.redisUrl ?? '', 'worker', 'metrics');
  redis.on('error', () => {
    // /readyz reports it.
  });
  const config = {
    ...kit.config,
    httpPort: kit.config.metricsPort ?? 0,
    dashboardToken: undefined,
    intakeToken: undefined,
  };
  const keys = keysFor(kit.config.prefix);
  kit.metrics.watchRedis({ queues: [], redis, keys, logger: kit.logger });
  const server = await startHttpServer({
    config,
    logger: kit.logger,
    metrics: kit.metrics,
    redis,
    queues: [],
    roles: () => roles.map((r) => ({ name: r.name, running: r.running() })),
    authPauseKey: keys.authPause,
  });
  kit.logger.info({ url: server.url }, LIFECYCLE.httpListening);
  return {
    name: 'metrics',
    running: () => true,
    close: async () => {
      await server.close();
      redis.disconnect();
    },
  };
}
