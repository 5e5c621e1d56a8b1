import { randomBytes } from 'node:crypto';
import { SETTINGS } from '../config/settings.js';
import { parseDurationMs, parseRate } from '../config/units.js';
import { untilAborted } from '../time/deadline.js';
import { startSimulator, type Faults, type SimulatorOptions } from '../simulator/index.js';
import { createLogger } from '../telemetry/logger.js';
import { EXIT, UsageError, type Command, type CommandContext } from './command.js';
import { LIFECYCLE } from '../telemetry/names.js';

/**
 * `agent-dispatch simulate`: runs the bundled agent-API simulator until SIGTERM/SIGINT. Prints one
 * JSON line, `{"url", "apiKey"}`, once it listens; request logs go to stderr at debug level, so
 * stdout stays machine-readable.
 */
export const simulateCommand: Command = {
  name: 'simulate',
  summary: 'run the bundled agent-API simulator, for demos and tests',
  usage:
    'simulate [--port N] [--host H] [--key K] [--work-time 200ms] [--send-limit 100/1h] ' +
    '[--stale-terminal 0ms] [--auto-create] [--seed PROJECT/JOB ...] [--fault-5xx RATE] ' +
    '[--fault-timeout RATE] [--fault-reset RATE] [--latency 50ms]',
  details: [
    'Serves POST /v2/agent/{projectId}/job (create), POST /v2/agent/{projectId}/job/{id}/message and',
    "GET /v2/agent/{projectId}/job/{id} as the vendor's OpenAPI document describes them, with a sliding",
    'per-project send limit (creations count in it) and a job lifecycle (active, then completed with a',
    'pull request after the work time).',
    '',
    'The key comes from --key, else it is a random one; AGENT_API_KEY is never read, so a real key',
    'in the environment is never printed. The key is printed on purpose in the first output line',
    '{"url": ..., "apiKey": ...}: it is the simulator\'s own key, not a secret of any real API.',
    'Point the service at it with AGENT_API_URL=<url> AGENT_API_KEY=<apiKey>.',
    '',
    'Fault rates are shares from 0 to 1. LOG_LEVEL=debug logs every request (to stderr).',
    '',
    'Example: agent-dispatch simulate --port 4010 --seed acme/job-1 --fault-5xx 0.1 --latency 50ms',
  ].join('\n'),
  options: {
    port: { type: 'string', description: 'port to listen on (0: a free port)', placeholder: 'N' },
    host: {
      type: 'string',
      description: 'address to listen on (default 127.0.0.1)',
      placeholder: 'H',
    },
    key: { type: 'string', description: 'bearer key the simulator accepts', placeholder: 'K' },
    'work-time': {
      type: 'string',
      description: 'how long a run stays active (default 200ms)',
      placeholder: 'DURATION',
    },
    'send-limit': {
      type: 'string',
      description: 'sends per project per sliding window (default 100/1h)',
      placeholder: 'N/DURATION',
    },
    'stale-terminal': {
      type: 'string',
      description: 'how long a job shows its previous status after a send (default 0ms)',
      placeholder: 'DURATION',
    },
    'auto-create': {
      type: 'boolean',
      description: 'create unknown jobs on first use instead of answering 404',
    },
    seed: {
      type: 'string',
      multiple: true,
      description: 'create a completed job (repeatable)',
      placeholder: 'PROJECT/JOB',
    },
    'fault-5xx': {
      type: 'string',
      description: 'share of requests answered 500/502/503 unprocessed',
      placeholder: 'RATE',
    },
    'fault-timeout': {
      type: 'string',
      description: 'share of sends processed but never answered',
      placeholder: 'RATE',
    },
    'fault-reset': {
      type: 'string',
      description: 'share of sends processed, then the connection reset',
      placeholder: 'RATE',
    },
    latency: {
      type: 'string',
      description: 'delay before each answer: 50ms, or a range 20ms..80ms',
      placeholder: 'DURATION',
    },
  },
  run: runSimulate,
};

async function runSimulate(ctx: CommandContext): Promise<number> {
  const options = simulatorOptions(ctx);
  const seedList = seeds(ctx.values['seed']);
  const level = SETTINGS.LOG_LEVEL.schema.safeParse(
    ctx.env['LOG_LEVEL'] ?? SETTINGS.LOG_LEVEL.default,
  );
  if (!level.success)
    throw new UsageError(`LOG_LEVEL: ${level.error.issues.map((i) => i.message).join('; ')}`);
  const logger = createLogger(level.data, ctx.stderr).child({ role: 'simulate' });
  const simulator = await startSimulator({ ...options, logger });
  for (const [projectId, jobId] of seedList) simulator.seedJob(projectId, jobId);
  ctx.stdout.write(`${JSON.stringify({ url: simulator.url, apiKey: options.apiKey })}\n`);
  logger.info({ url: simulator.url }, LIFECYCLE.simulatorListening);
  await untilAborted(ctx.signal);
  await simulator.close();
  logger.info({ url: simulator.url }, LIFECYCLE.simulatorStopped);
  return EXIT.ok;
}

/** Reads every flag; a bad one throws a {@link UsageError} naming it. */
function simulatorOptions(ctx: CommandContext): SimulatorOptions & { apiKey: string } {
  const text = (name: string): string | undefined => {
    const value = ctx.values[name];
    return typeof value === 'string' ? value : undefined;
  };
  const faults: Partial<Faults> = {};
  const fault5xx = rate('--fault-5xx', text('fault-5xx'));
  if (fault5xx !== undefined) faults.serverErrorRate = fault5xx;
  const faultTimeout = rate('--fault-timeout', text('fault-timeout'));
  if (faultTimeout !== undefined) faults.timeoutRate = faultTimeout;
  const faultReset = rate('--fault-reset', text('fault-reset'));
  if (faultReset !== undefined) faults.resetRate = faultReset;
  const latency = latencyOf(text('latency'));
  if (latency !== undefined) faults.latencyMs = latency;
  const sendLimit = text('send-limit');
  const limit = sendLimit === undefined ? undefined : parseRate(sendLimit);
  if (sendLimit !== undefined && !limit)
    throw new UsageError(`--send-limit: expected N/DURATION such as 100/1h, got "${sendLimit}"`);
  return {
    // Never AGENT_API_KEY: that may be a real key, and this one is printed.
    apiKey: nonEmpty(text('key')) ?? `sim-${randomBytes(16).toString('hex')}`,
    port: port(text('port')),
    host: text('host') ?? '127.0.0.1',
    workTimeMs: duration('--work-time', text('work-time')) ?? 200,
    staleTerminalMs: duration('--stale-terminal', text('stale-terminal')) ?? 0,
    autoCreateJobs: ctx.values['auto-create'] === true,
    ...(limit ? { sendLimit: limit } : {}),
    faults,
  };
}

function duration(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseDurationMs(value);
  if (ms === undefined)
    throw new UsageError(
      `${flag}: expected a duration such as 250ms, 5s, 2m or 1h, got "${value}"`,
    );
  return ms;
}

function rate(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const share = Number(value);
  if (value.trim() === '' || !Number.isFinite(share) || share < 0 || share > 1) {
    throw new UsageError(`${flag}: expected a share from 0 to 1, got "${value}"`);
  }
  return share;
}

function latencyOf(value: string | undefined): number | [number, number] | undefined {
  if (value === undefined) return undefined;
  const [low, high] = value.split('..');
  const min = duration('--latency', low ?? '');
  if (high === undefined) return min;
  const max = duration('--latency', high);
  if (min === undefined || max === undefined || max < min) {
    throw new UsageError(`--latency: expected 50ms or a range such as 20ms..80ms, got "${value}"`);
  }
  return [min, max];
}

function port(value: string | undefined): number {
  if (value === undefined) return 0;
  const parsed = Number(value);
  if (!/^\d+$/.test(value.trim()) || parsed > 65535) {
    throw new UsageError(`--port: expected a whole number from 0 to 65535, got "${value}"`);
  }
  return parsed;
}

function seeds(value: string | boolean | string[] | undefined): [string, string][] {
  const list = typeof value === 'string' ? [value] : Array.isArray(value) ? value : [];
  return list.map((entry) => {
    const slash = entry.indexOf('/');
    if (slash <= 0 || slash === entry.length - 1) {
      throw new UsageError(`--seed: expected PROJECT/JOB, got "${entry}"`);
    }
    return [entry.slice(0, slash), entry.slice(slash + 1)];
  });
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}
