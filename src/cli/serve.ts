import { untilAborted } from '../time/deadline.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { EXIT, type Command } from './command.js';
import { configOf, roleKit, startServing } from './compose.js';
import { checkDurability } from './roles.js';

/** `agent-dispatch serve`: the HTTP server only (dashboard, metrics, health, intake). */
export const serveCommand: Command = {
  name: 'serve',
  summary: 'the HTTP server only: dashboard, metrics, health, intake',
  usage: 'serve [--port N]',
  details: [
    'Serves /dashboard (needs DASHBOARD_TOKEN), /metrics, /healthz, /readyz and, with INTAKE_TOKEN,',
    'POST /v1/followups; with EVENTS_TOKEN, GET /v1/events and /v1/events/stream (docs/events.md);',
    'with OPERATOR_TOKEN the controls. GET /openapi.json describes the /v1 routes (docs/http-api.md).',
    'Binds HTTP_HOST (127.0.0.1). Needs REDIS_URL. Stops on SIGTERM or SIGINT.',
  ].join('\n'),
  options: {
    port: {
      type: 'string',
      description: 'port to listen on (0: a free one)',
      setting: 'HTTP_PORT',
      placeholder: 'N',
    },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const base = roleKit(await configOf(this, ctx));
    const kit = { ...base, logger: base.logger.child({ role: 'serve' }) };
    const { config, logger } = kit;
    const durability = await checkDurability(kit);
    if (durability !== EXIT.ok) return durability;
    const serving = await startServing(kit, {
      name: 'serve',
      dashboard: true,
      intake: config.tokens.intake.length > 0,
    });
    const { url, port } = serving.server;
    logger.info(
      {
        url,
        port,
        dashboard:
          config.tokens.dashboard.length > 0 ? `${url}/dashboard` : 'off (set DASHBOARD_TOKEN)',
        intake: serving.producer ? `${url}/v1/followups` : 'off (set INTAKE_TOKEN)',
      },
      LIFECYCLE.httpListening,
    );
    await untilAborted(ctx.signal);
    logger.info({}, LIFECYCLE.roleStopping);
    await serving.close();
    logger.info({}, LIFECYCLE.roleStopped);
    return EXIT.ok;
  },
};
