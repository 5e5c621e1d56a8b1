import type { Config } from '../config/index.js';
import { createLogger, type Logger } from '../telemetry/logger.js';
import { createMetrics, type Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { EXIT, type CommandContext } from './command.js';

/** A started role: what the runner needs to report on it and stop it. */
export interface RunningRole {
  readonly name: string;
  running(): boolean;
  close(): Promise<void>;
}

/** What the roles of one process share. */
export interface RoleKit {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/** Builds the logger and metrics of a role process. */
export function roleKit(config: Config): RoleKit {
  return { config, logger: createLogger(config.logLevel), metrics: createMetrics() };
}

/**
 * Runs started roles until the first SIGTERM/SIGINT, then closes them all, in reverse order of
 * start, each even if one before it failed, and resolves to the exit code.
 */
export async function runUntilSignal(
  ctx: CommandContext,
  kit: RoleKit,
  roles: readonly RunningRole[],
): Promise<number> {
  await new Promise<void>((resolve) => {
    if (ctx.signal.aborted) resolve();
    ctx.signal.addEventListener('abort', () => resolve(), { once: true });
  });
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
