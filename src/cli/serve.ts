import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { loadConfig, type Config } from '../config/index.js';
import { startHttpServer } from '../http/index.js';
import { createProducer } from '../producer/index.js';
import { connect } from '../redis/connections.js';
import { keysFor, QUEUE_NAMES } from '../redis/keys.js';
import { untilAborted, within } from '../runtime/deadline.js';
import { createLogger, logFormatFor, type Logger } from '../telemetry/logger.js';
import { createMetrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { EXIT, type Command, type CommandContext } from './command.js';

/** `agent-dispatch serve`: the HTTP server only (dashboard, metrics, health, intake). */
export const serveCommand: Command = {
  name: 'serve',
  summary: 'the HTTP server only: dashboard, metrics, health, intake',
  usage: 'serve [--port N]',
  details: [
    'Serves /dashboard (needs DASHBOARD_TOKEN), /metrics, /healthz, /readyz and, with INTAKE_TOKEN,',
    'POST /v1/followups. Needs REDIS_URL. Stops on SIGTERM or SIGINT.',
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
    const port = typeof ctx.values['port'] === 'string' ? ctx.values['port'] : undefined;
    const config = loadConfig(ctx.env, { HTTP_PORT: port }, { required: ['REDIS_URL'] });
    await serve(
      config,
      createLogger(config.logLevel, undefined, logFormatFor(config.logFormat, false)).child({
        role: 'serve',
      }),
      ctx,
    );
    return EXIT.ok;
  },
};

/** Runs the HTTP server with its own Redis connection until `ctx.signal` aborts. */
async function serve(
  config: Config,
  logger: Logger,
  ctx: Pick<CommandContext, 'signal'>,
): Promise<void> {
  const redisUrl = config.redisUrl ?? '';
  const metrics = createMetrics({ logger });
  const redis = connect(redisUrl, 'worker', 'serve');
  const logRedisError = redisErrorLog(logger, redis);
  redis.on('error', (err: Error) => logRedisError(err, {}));
  const queues = Object.values(QUEUE_NAMES).map((name) => {
    const queue = new Queue(name, { connection: redis, prefix: config.prefix });
    queue.on('error', (err: Error) => logRedisError(err, { queue: name }));
    return queue;
  });
  const producer = config.intakeToken
    ? createProducer({
        redisUrl,
        prefix: config.prefix,
        promptMaxBytes: config.promptMaxBytes,
        sendAttempts: config.sendAttempts,
      })
    : undefined;
  metrics.watchRedis({ queues, redis, keys: keysFor(config.prefix), logger });
  const close = closer(logger, config.shutdownTimeoutMs);
  try {
    const server = await startHttpServer({
      config,
      logger,
      metrics,
      redis,
      queues,
      producer,
      roles: () => [],
    });
    close.add('http', () => server.close());
    logger.info(
      {
        url: server.url,
        port: server.port,
        dashboard: config.dashboardToken ? `${server.url}/dashboard` : 'off (set DASHBOARD_TOKEN)',
        intake: producer ? `${server.url}/v1/followups` : 'off (set INTAKE_TOKEN)',
      },
      LIFECYCLE.httpListening,
    );
    await untilAborted(ctx.signal);
    logger.info({}, LIFECYCLE.roleStopping);
  } finally {
    if (producer) close.add('producer', () => producer.close());
    for (const queue of queues) close.add(`queue:${queue.name}`, () => queue.close());
    close.add('redis', async () => void (await redis.quit()));
    await close.run();
    // QUIT waits for a reconnect while Redis is down; past the deadline the socket just goes.
    redis.disconnect();
    logger.info({}, LIFECYCLE.roleStopped);
  }
}

/**
 * Logs the first Redis error of an outage at warn and the rest at debug: the queues share the
 * connection and repeat its errors, and a reconnect loop would log them every 2 s.
 */
function redisErrorLog(logger: Logger, redis: Redis): (err: Error, fields: object) => void {
  let reported = false;
  redis.on('ready', () => {
    if (reported) logger.info({}, 'redis:ready');
    reported = false;
  });
  return (err, fields) => {
    logger[reported ? 'debug' : 'warn']({ err, ...fields }, LIFECYCLE.redisError);
    reported = true;
  };
}

/**
 * Ordered shutdown: every step runs even if one before it failed, and the whole is bounded by the
 * deadline, after which what is left is abandoned (the process is about to exit).
 */
function closer(logger: Logger, deadlineMs: number) {
  const steps: [string, () => Promise<void>][] = [];
  return {
    add(name: string, step: () => Promise<void>) {
      steps.push([name, step]);
    },
    async run() {
      const all = (async () => {
        for (const [name, step] of steps) {
          await step().catch((err: unknown) =>
            logger.warn({ err, step: name }, 'shutdown:step-failed'),
          );
        }
      })();
      await within(all, deadlineMs, () => logger.warn({ deadlineMs }, 'shutdown:deadline'));
    },
  };
}
