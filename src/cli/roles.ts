import { clearTextApiHost } from '../config/index.js';
import { startConsumer } from '../consumer/index.js';
import { startPoller } from '../poller/index.js';
import { connect } from '../redis/connections.js';
import { assessOnce, type DurabilityAssessment } from '../redis/durability.js';
import { untilAborted } from '../time/deadline.js';
import type { Role } from '../runtime/role.js';
import { startPerShard } from '../runtime/shards.js';
import { startWebhooks } from '../webhooks/index.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { EXIT, type Command, type CommandContext } from './command.js';
import { configOf, roleKit, startServing, type RoleKit } from './compose.js';
import { verifyDeployment } from './deployment.js';

/** `agent-dispatch worker`: the consumer role only; run as many as the load needs. */
export const workerCommand = roleCommand(startConsumer, {
  name: 'worker',
  summary: 'the consumer role only: sends follow-ups (scale this one out)',
  usage: 'worker [--concurrency N] [--rate N/DURATION]',
  details: 'Stops gracefully on SIGTERM or SIGINT: in-flight sends finish within SHUTDOWN_TIMEOUT.',
  options: {
    concurrency: {
      type: 'string',
      placeholder: 'N',
      setting: 'WORKER_CONCURRENCY',
      description: 'sends in flight in this process at most',
    },
    rate: {
      type: 'string',
      placeholder: 'N/DURATION',
      setting: 'SEND_RATE_LIMIT',
      description: 'sends per project per window, fleet-wide',
    },
  },
});

/** `agent-dispatch poller`: the poller role only. */
export const pollerCommand = roleCommand(
  startPoller,
  {
    name: 'poller',
    summary: 'the poller role only: tracks sent follow-ups and publishes their events',
    usage: 'poller [--interval DURATION]',
    details: [
      'Any number may run: their ticks never overlap. Stops gracefully on SIGTERM or SIGINT.',
      'It also delivers the webhooks (WEBHOOK_URL, `agent-dispatch webhook add`; docs/webhooks.md).',
    ].join('\n'),
    options: {
      interval: {
        type: 'string',
        placeholder: 'DURATION',
        setting: 'POLL_INTERVAL',
        description: 'period of the scheduled tick',
      },
    },
  },
  // The webhook deliverer runs beside the poller (docs/webhooks.md).
  (kit) => [startWebhooks(kit)],
);

/**
 * A command that runs one role in its process (`worker`, `poller`) until a signal. Both need
 * Redis and the API key; `run` resolves to the exit code.
 */
function roleCommand(
  start: (kit: RoleKit) => Role,
  spec: Omit<Command, 'requires' | 'run'>,
  also: (kit: RoleKit) => Role[] = () => [],
): Command {
  return {
    ...spec,
    requires: ['REDIS_URL', 'AGENT_API_KEY'],
    async run(ctx) {
      const kit = roleKit(await configOf(this, ctx));
      warnIfClearTextKey(kit);
      await verifyDeployment(kit.config, kit.logger, ctx.signal);
      if (ctx.signal.aborted) return EXIT.ok;
      const durability = await checkDurability(kit);
      if (durability !== EXIT.ok) return durability;
      return runUntilSignal(ctx, kit, [startPerShard(spec.name, kit, start), ...also(kit)]);
    },
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
 * The start-up check of a process that writes dispatches (`REDIS_DURABILITY`): probes the server
 * once (INFO, CONFIG GET appendonly/appendfsync), logs one warning when it cannot keep what it
 * acknowledged (naming `appendfsync` or `appendonly` and what can be lost), and resolves to exit
 * code 2 when the setting is strict (`fsync!`, `replicas:N!`) and the server cannot meet it.
 *
 * Only a strict setting waits for the answer (and so for Redis): otherwise the roles start at once
 * and the warning follows when Redis answers, as a role started before its Redis would.
 */
export async function checkDurability(kit: RoleKit): Promise<number> {
  const { config, logger } = kit;
  const setting = config.durability;
  if (setting.mode === 'none' || !config.redisUrl) return EXIT.ok;
  const redis = connect(config, 'worker', 'durability-check');
  redis.on('error', () => {
    // The roles report Redis outages.
  });
  const checked = assessOnce(config.redisUrl, setting, redis)
    .then((assessment) => {
      warnNotDurable(kit, assessment);
      return assessment;
    })
    .finally(() => redis.disconnect());
  if (!setting.strict) {
    checked.catch(() => {});
    return EXIT.ok;
  }
  const assessment = await checked;
  if (assessment.warning === undefined) return EXIT.ok;
  logger.error(
    { setting: 'REDIS_DURABILITY', mode: assessment.mode },
    `${LIFECYCLE.redisNotDurable}: REDIS_DURABILITY is strict, and ${assessment.warning}`,
  );
  logger.flush();
  return EXIT.usage;
}

function warnNotDurable(kit: RoleKit, assessment: DurabilityAssessment): void {
  if (assessment.warning === undefined) return;
  kit.logger.warn(
    { setting: 'REDIS_DURABILITY', mode: assessment.mode },
    `${LIFECYCLE.redisNotDurable}: ${assessment.warning}`,
  );
}

/**
 * Runs started roles until the first SIGTERM/SIGINT, then closes them all, in reverse order of
 * start, each even if one before it failed, and resolves to the exit code. A worker or poller
 * process with `METRICS_PORT` also serves /metrics, /healthz and /readyz there (no dashboard, no
 * intake), so each process of a fleet can be scraped and probed.
 */
export async function runUntilSignal(
  ctx: CommandContext,
  kit: RoleKit,
  started: readonly Role[],
): Promise<number> {
  const roles = [...started];
  if (kit.config.metricsPort !== undefined) {
    const config = {
      ...kit.config,
      httpPort: kit.config.metricsPort,
      // Metrics and probes only: every scope off.
      tokens: { intake: [], events: [], operator: [], dashboard: [] },
    };
    const metrics = await startServing(
      { ...kit, config },
      { name: 'metrics', dashboard: false, intake: false, roles: started },
    );
    kit.logger.info({ url: metrics.server.url }, LIFECYCLE.httpListening);
    roles.push({ ...metrics, name: 'metrics' });
  }
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
