import { z } from 'zod';
import type { DurabilitySetting } from '../redis/durability.js';
import { KeyFileError, readKeyFile } from './key-file.js';
import { SETTINGS, type LOG_FORMATS, type SettingName } from './settings.js';
import { nonEmpty } from './values.js';
import type { Rate } from './units.js';

export { SETTINGS, type SettingName } from './settings.js';
export { formatDuration, parseDurationMs, parseRate, type Rate } from './units.js';
export {
  KeyFileError,
  readKeyFile,
  watchKeyFile,
  type KeyFileListener,
  type KeyFileWatcher,
} from './key-file.js';

/** How log lines are written: JSON lines for machines, or pino-pretty's lines for a person. */
export type LogFormat = (typeof LOG_FORMATS)[number];

/** The parsed, frozen configuration every role receives. Units are in the names. */
export interface Config {
  readonly redisUrl: string | undefined;
  readonly durability: DurabilitySetting;
  /** `REDIS_CLUSTER`: `redisUrl` is the seed node of a Redis Cluster. */
  readonly redisCluster: boolean;
  /** `DISPATCH_SHARDS`: how many shards the keyspace is split into (see `shardLayout`). */
  readonly shardCount: number;
  /** `SHARDS`: the shards this process serves, ascending; every shard when unset. */
  readonly servedShards: readonly number[];
  readonly agentApiUrl: string;
  /** From `AGENT_API_KEY`, or read from `agentApiKeyFile` when that is set. */
  readonly agentApiKey: string | undefined;
  /** `AGENT_API_KEY_FILE`: where the key is re-read from on SIGHUP, on change, before probes. */
  readonly agentApiKeyFile: string | undefined;
  readonly prefix: string;
  readonly sendRateLimit: Rate;
  readonly workerConcurrency: number;
  readonly pollIntervalMs: number;
  readonly eventsStream: string;
  readonly eventsMaxLen: number;
  readonly httpPort: number;
  readonly metricsPort: number | undefined;
  readonly logLevel: string;
  /** Unset: the command decides (`start` is pretty on a terminal; everything else JSON). */
  readonly logFormat: LogFormat | undefined;
  /** `OTEL_TRACES_EXPORTER`: the trace exporters to start; empty = tracing off (the default). */
  readonly tracesExporters: readonly string[];
  readonly trackTimeoutMs: number;
  readonly activeGraceMs: number;
  readonly pollMinIntervalMs: number;
  readonly pollMaxIntervalMs: number;
  readonly pollConcurrency: number;
  /** `POLL_LEARN`: the poller learns where each project's runs end and reads densely there. */
  readonly pollLearn: boolean;
  readonly sendAttempts: number;
  readonly stalledTimeoutMs: number;
  readonly sendTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly ambiguousResend: boolean;
  readonly promptMaxBytes: number;
  readonly dispatchRetentionMs: number;
  readonly repairGraceMs: number;
  readonly shutdownTimeoutMs: number;
  readonly intakeToken: string | undefined;
  readonly dashboardToken: string | undefined;
  readonly dashboardAllowRetries: boolean;
  /** `DASHBOARD_ALLOW_CONTROLS`: the follow-ups page may pause, resume and cancel. */
  readonly dashboardAllowControls: boolean;
}

/** One problem with one setting. `message` never contains a secret setting's value. */
export interface SettingProblem {
  readonly setting: string;
  readonly message: string;
}

/** Thrown by {@link loadConfig}; lists every bad setting at once. Code `bad_setting`. */
export class ConfigError extends Error {
  readonly code = 'bad_setting';
  constructor(readonly problems: readonly SettingProblem[]) {
    super(problems.map((p) => `${p.setting}: ${p.message}`).join('\n'));
    this.name = 'ConfigError';
  }
}

/** What a role needs besides the defaults: `required` settings must be present. */
export interface LoadOptions {
  readonly required?: readonly SettingName[];
}

/** Each setting's parsed value; `undefined` for one without a default that is not set. */
type Parsed = {
  [K in SettingName]: (typeof SETTINGS)[K] extends { readonly default: string }
    ? z.output<(typeof SETTINGS)[K]['schema']>
    : z.output<(typeof SETTINGS)[K]['schema']> | undefined;
};

/**
 * Parses every setting from `env` (plus `overrides`, from command-line flags, which win), reports
 * all problems at once, and returns a frozen {@link Config}. The only reader of the environment.
 */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: Partial<Record<SettingName, string>> = {},
  options: LoadOptions = {},
): Config {
  const problems: SettingProblem[] = [];
  const parsed: Partial<Record<SettingName, unknown>> = {};
  for (const [name, setting] of Object.entries(SETTINGS) as [
    SettingName,
    (typeof SETTINGS)[SettingName],
  ][]) {
    const raw =
      overrides[name] ??
      nonEmpty(env[name]) ??
      ('default' in setting ? setting.default : undefined);
    if (raw === undefined) {
      // The key may come from its file instead.
      const fromFile =
        name === 'AGENT_API_KEY' &&
        (overrides.AGENT_API_KEY_FILE ?? nonEmpty(env['AGENT_API_KEY_FILE'])) !== undefined;
      if (options.required?.includes(name) && !fromFile)
        problems.push({
          setting: name,
          message:
            name === 'AGENT_API_KEY'
              ? 'is required (or AGENT_API_KEY_FILE, a file holding it)'
              : 'is required',
        });
      continue;
    }
    const result = (setting.schema as z.ZodType).safeParse(raw);
    if (result.success) parsed[name] = result.data;
    else
      problems.push({
        setting: name,
        message: result.error.issues.map((i) => i.message).join('; '),
      });
  }
  const agentApiKey = keyOf(parsed, problems);
  const p = parsed as Parsed;
  const servedShards = problems.length > 0 ? [] : shardsOf(p, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    redisUrl: p.REDIS_URL,
    durability: Object.freeze(p.REDIS_DURABILITY),
    redisCluster: p.REDIS_CLUSTER,
    shardCount: p.DISPATCH_SHARDS,
    servedShards,
    agentApiUrl: p.AGENT_API_URL.replace(/\/+$/, ''),
    agentApiKey,
    agentApiKeyFile: p.AGENT_API_KEY_FILE,
    prefix: p.DISPATCH_PREFIX,
    sendRateLimit: Object.freeze(p.SEND_RATE_LIMIT),
    workerConcurrency: p.WORKER_CONCURRENCY,
    pollIntervalMs: p.POLL_INTERVAL,
    eventsStream: p.EVENTS_STREAM,
    eventsMaxLen: p.EVENTS_MAXLEN,
    httpPort: p.HTTP_PORT,
    metricsPort: p.METRICS_PORT,
    logLevel: p.LOG_LEVEL,
    logFormat: p.LOG_FORMAT,
    tracesExporters: Object.freeze(p.OTEL_TRACES_EXPORTER ?? []),
    trackTimeoutMs: p.TRACK_TIMEOUT,
    activeGraceMs: p.ACTIVE_GRACE,
    pollMinIntervalMs: p.POLL_MIN_INTERVAL,
    pollMaxIntervalMs: p.POLL_MAX_INTERVAL,
    pollConcurrency: p.POLL_CONCURRENCY,
    pollLearn: p.POLL_LEARN,
    sendAttempts: p.SEND_ATTEMPTS,
    stalledTimeoutMs: p.STALLED_TIMEOUT,
    sendTimeoutMs: p.SEND_TIMEOUT,
    connectTimeoutMs: p.CONNECT_TIMEOUT,
    ambiguousResend: p.AMBIGUOUS_RESEND,
    promptMaxBytes: p.PROMPT_MAX_BYTES,
    dispatchRetentionMs: p.DISPATCH_RETENTION,
    repairGraceMs: p.REPAIR_GRACE,
    shutdownTimeoutMs: p.SHUTDOWN_TIMEOUT,
    intakeToken: p.INTAKE_TOKEN,
    dashboardToken: p.DASHBOARD_TOKEN,
    dashboardAllowRetries: p.DASHBOARD_ALLOW_RETRIES,
    dashboardAllowControls: p.DASHBOARD_ALLOW_CONTROLS,
  });
}

/**
 * The host of `agentApiUrl` when the key would travel to it in clear text (`http://` to a host
 * that is not loopback: 127.0.0.0/8, ::1, localhost), else `undefined`. Allowed (a sidecar or a
 * proxy on a private network may need it), but worth a warning.
 */
export function clearTextApiHost(agentApiUrl: string): string | undefined {
  const url = new URL(agentApiUrl);
  if (url.protocol !== 'http:') return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const loopback =
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    host === '::1' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
  return loopback ? undefined : url.hostname;
}

/** The key: `AGENT_API_KEY`, or the content of `AGENT_API_KEY_FILE`; never both. */
function keyOf(
  parsed: Partial<Record<SettingName, unknown>>,
  problems: SettingProblem[],
): string | undefined {
  const key = parsed.AGENT_API_KEY as string | undefined;
  const file = parsed.AGENT_API_KEY_FILE as string | undefined;
  if (file === undefined) return key;
  if (key !== undefined) {
    problems.push({
      setting: 'AGENT_API_KEY_FILE',
      message: 'set AGENT_API_KEY or AGENT_API_KEY_FILE, not both',
    });
    return undefined;
  }
  try {
    return readKeyFile(file);
  } catch (err) {
    if (!(err instanceof KeyFileError)) throw err;
    problems.push({
      setting: 'AGENT_API_KEY_FILE',
      message: err.message.replace(/^AGENT_API_KEY_FILE: /, ''),
    });
    return undefined;
  }
}

/** The shards this process serves (`SHARDS`, every one by default), each below `DISPATCH_SHARDS`. */
function shardsOf(p: Parsed, problems: SettingProblem[]): readonly number[] {
  const all = Array.from({ length: p.DISPATCH_SHARDS }, (_, i) => i);
  if (p.SHARDS === undefined) return Object.freeze(all);
  const outside = p.SHARDS.filter((i) => i >= p.DISPATCH_SHARDS);
  if (outside.length > 0)
    problems.push({
      setting: 'SHARDS',
      message: `shard ${outside.join(', ')} does not exist: DISPATCH_SHARDS=${p.DISPATCH_SHARDS} numbers them 0 to ${p.DISPATCH_SHARDS - 1}`,
    });
  return p.SHARDS;
}
