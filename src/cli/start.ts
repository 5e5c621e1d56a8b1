import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig, type Config, type SettingName } from '../config/index.js';
import { startConsumer } from '../consumer/index.js';
import { startPoller } from '../poller/index.js';
import { startEmbeddedRedis, type EmbeddedRedis } from './embedded-redis.js';
import { DEMO_DATA_DIR } from './embedded-folder.js';
import { QUEUE_NAMES } from '../redis/keys.js';
import { startSimulator, type Simulator } from '../simulator/index.js';
import { createLogger, logFormatFor } from '../telemetry/logger.js';
import { EXIT, type Command, type CommandContext } from './command.js';
import { startProgress } from './progress.js';
import { checkDurability, runUntilSignal, warnIfClearTextKey } from './roles.js';
import { configOf, roleKit, startServing } from './compose.js';
import { verifyDeployment } from './deployment.js';
import { startPerShard } from '../runtime/shards.js';
import { startWebhooks } from '../webhooks/index.js';

/**
 * Demo follow-ups `start` enqueues when it runs against the simulator with its private Redis (keys
 * make it once only). Never into a Redis the operator named: that one may hold real work.
 */
const DEMO = [1, 2, 3].flatMap((n) =>
  ['docs-site', 'api-reference'].map((projectId) => ({
    projectId,
    jobId: `demo-job-${n}`,
    prompt: `Demo follow-up ${n}: tighten the wording of the quickstart.`,
    key: `demo:${projectId}:${n}`,
    meta: { demo: true },
  })),
);

/** The tokens `start` makes when unset, and prints: one per scope. */
const DEMO_TOKENS = [
  ['dashboard', 'DASHBOARD_TOKEN'],
  ['intake', 'INTAKE_TOKEN'],
  ['events', 'EVENTS_TOKEN'],
  ['operator', 'OPERATOR_TOKEN'],
] as const;

/** `agent-dispatch start`: every role in one process, plus the HTTP server (`npm start`). */
export const startCommand: Command = {
  name: 'start',
  summary: 'every role in one process plus the HTTP server: the embedded default (npm start)',
  usage: 'start [--port N] [--simulator]',
  details: [
    'Without REDIS_URL it runs a private redis-server (AOF on, data in .data/redis) and stops it on',
    'exit. With neither REDIS_URL nor AGENT_API_KEY (the embedded demo) it sends to the bundled',
    'simulator, says so on its first line, and enqueues a few demo follow-ups into the private Redis.',
    'With REDIS_URL and no key it exits 2 naming AGENT_API_KEY, unless --simulator asks for the',
    'simulator (then no demo follow-ups are enqueued). It prints where the dashboard is and shows',
    'progress as follow-ups move. Stops gracefully on SIGTERM or SIGINT.',
    'It makes a token of each scope left unset (DASHBOARD_TOKEN, INTAKE_TOKEN, EVENTS_TOKEN,',
    'OPERATOR_TOKEN) and prints how to use each.',
    'It delivers the webhooks too (WEBHOOK_URL, `agent-dispatch webhook add`; docs/webhooks.md).',
  ].join('\n'),
  options: {
    simulator: {
      type: 'boolean',
      description: 'send to the bundled agent-API simulator instead of AGENT_API_URL',
    },
    'data-dir': {
      type: 'string',
      placeholder: 'DIR',
      description: `data folder of the private redis-server (default ${DEMO_DATA_DIR})`,
    },
    port: {
      type: 'string',
      placeholder: 'N',
      setting: 'HTTP_PORT',
      description: 'port of the HTTP server',
    },
  },
  async run(ctx) {
    const base = await configOf(this, ctx);
    const say = (line: string) => ctx.stderr.write(`agent-dispatch: ${line}\n`);
    const cleanup: (() => Promise<void>)[] = [];
    try {
      const dataDir =
        typeof ctx.values['data-dir'] === 'string' ? ctx.values['data-dir'] : DEMO_DATA_DIR;
      const simulator = useSimulator(base, ctx);
      const overrides = await embeddedServices(base, { dataDir, simulator }, say, cleanup);
      return await runAll(
        loadConfig(ctx.env, { ...overrides, ...flagOverrides(ctx) }),
        overrides,
        ctx,
        say,
      );
    } finally {
      for (const step of cleanup.reverse()) await step().catch(() => {});
    }
  },
};

/**
 * Whether `start` sends to the bundled simulator: when the operator asked (`--simulator`), or in
 * the embedded demo (neither REDIS_URL nor a key). A REDIS_URL without a key is a bad setting: the
 * simulator would consume that Redis's real queue and publish made-up events (contract, promise 6).
 * Decided before anything connects, so a refusal writes nothing.
 */
function useSimulator(base: Config, ctx: CommandContext): 'asked' | 'demo' | undefined {
  if (ctx.values['simulator'] === true) return 'asked';
  // AGENT_API_KEY_FILE is another way to configure the key; its presence is enough here.
  const keyConfigured = base.agentApiKey !== undefined || nonEmpty(ctx.env['AGENT_API_KEY_FILE']);
  if (keyConfigured) return undefined;
  if (!base.redisUrl) return 'demo';
  throw new ConfigError([
    {
      setting: 'AGENT_API_KEY',
      message:
        'is required when REDIS_URL is set (or AGENT_API_KEY_FILE); pass --simulator to send to the bundled simulator instead',
    },
  ]);
}

/** Starts the simulator and the private Redis when `start` uses them. */
async function embeddedServices(
  base: Config,
  { dataDir, simulator: why }: { dataDir: string; simulator: 'asked' | 'demo' | undefined },
  say: (line: string) => void,
  cleanup: (() => Promise<void>)[],
): Promise<Partial<Record<SettingName, string>>> {
  const overrides: Partial<Record<SettingName, string>> = {};
  const logger = createLogger(base.logLevel, undefined, logFormatFor(base.logFormat, true));
  if (why) {
    const apiKey = `sim-${randomBytes(12).toString('hex')}`;
    const simulator: Simulator = await startSimulator({
      apiKey,
      autoCreateJobs: true,
      workTimeMs: 3_000,
    });
    cleanup.push(() => simulator.close());
    const reason = why === 'asked' ? '--simulator' : 'AGENT_API_KEY is not set';
    say(`${reason}: sending to the bundled simulator at ${simulator.url}, not to a real agent API`);
    Object.assign(overrides, { AGENT_API_URL: simulator.url, AGENT_API_KEY: apiKey });
  }
  if (!base.redisUrl) {
    const redis: EmbeddedRedis = await startEmbeddedRedis({ dataDir, logger });
    cleanup.push(() => redis.stop());
    say(
      `REDIS_URL is not set: running a private ${redis.server} at ${redis.url} (appendfsync ${redis.appendfsync}, data in ${dataDir})`,
    );
    overrides.REDIS_URL = redis.url;
  }
  // Every scope gets a token, so each route of the demo can be tried with the one printed.
  for (const [scope, setting] of DEMO_TOKENS)
    if (base.tokens[scope].length === 0) overrides[setting] = randomBytes(16).toString('hex');
  return overrides;
}

/** Runs worker, poller and HTTP server until a signal; resolves to the exit code. */
async function runAll(
  config: Config,
  made: Partial<Record<SettingName, string>>,
  ctx: CommandContext,
  say: (line: string) => void,
): Promise<number> {
  // start serves /metrics itself, on HTTP_PORT; METRICS_PORT is for single-role processes.
  const kit = roleKit({ ...config, metricsPort: undefined }, true);
  // The bundled simulator listens on loopback, so only a real API URL can warn here.
  warnIfClearTextKey(kit);
  await verifyDeployment(config, kit.logger, ctx.signal);
  const durability = await checkDurability(kit);
  if (durability !== EXIT.ok) return durability;
  const roles = [
    startPerShard('worker', kit, startConsumer),
    startPerShard('poller', kit, startPoller),
    startWebhooks(kit),
  ];
  const http = await startServing(
    { ...kit, config },
    { name: 'start', dashboard: true, intake: true, roles },
  );
  const { server, producer, redis } = http;
  const token = config.tokens.dashboard[0] ?? '';
  const login = made.DASHBOARD_TOKEN ? `?token=${token}` : ' (DASHBOARD_TOKEN)';
  say(`follow-ups page: ${server.url}/dashboard/followups${login}`);
  say(`dashboard (bull-board, same token): ${server.url}/dashboard`);
  const bearer = (scope: 'intake' | 'events' | 'operator', setting: SettingName) =>
    made[setting]
      ? ` with "Authorization: Bearer ${config.tokens[scope][0] ?? ''}"`
      : ` (${setting})`;
  say(`intake: POST ${server.url}/v1/followups${bearer('intake', 'INTAKE_TOKEN')}`);
  say(
    `events: GET ${server.url}/v1/events or /v1/events/stream${bearer('events', 'EVENTS_TOKEN')}`,
  );
  say(
    `operator: ${server.url}/v1/projects/ID, /v1/webhooks${bearer('operator', 'OPERATOR_TOKEN')}`,
  );
  say(`metrics: ${server.url}/metrics · health: ${server.url}/healthz, ${server.url}/readyz`);
  if (producer && made.AGENT_API_KEY && made.REDIS_URL) {
    const results = await producer.sendMany(DEMO);
    const fresh = results.filter((r) => !r.deduplicated).length;
    // A restart on the same data enqueues none: each demo follow-up has an idempotency key.
    say(
      `enqueued ${fresh} demo follow-up${fresh === 1 ? '' : 's'} (${results.length} in the demo set)`,
    );
  }
  // The progress line counts every shard's dispatch queue and tracked follow-ups.
  const queued = http.shards.flatMap(({ queues, keys }) => {
    const queue = queues.find((q) => q.name === QUEUE_NAMES.dispatch);
    return queue ? [{ queue, keys }] : [];
  });
  const stopProgress = startProgress({ shards: queued, redis, metrics: kit.metrics }, ctx.stderr);
  // Closed in reverse: the HTTP server first (no new intake), then the poller, then the worker.
  return runUntilSignal(ctx, kit, [
    ...roles,
    {
      ...http,
      close: async () => {
        stopProgress();
        await http.close();
      },
    },
  ]);
}

function flagOverrides(ctx: CommandContext): Partial<Record<SettingName, string>> {
  return typeof ctx.values['port'] === 'string' ? { HTTP_PORT: ctx.values['port'] } : {};
}

function nonEmpty(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== '';
}
