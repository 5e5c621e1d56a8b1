import { z } from 'zod';
import type { DurabilitySetting } from './durability.js';
import { ConfigError, type SettingProblem } from './errors.js';
import { keyOf } from './key-file.js';
import { SETTINGS, type LOG_FORMATS, type SettingName } from './settings.js';
import { nonEmpty } from './values.js';
import { webhookPairProblems } from './webhook-settings.js';
import { orgRateProblems, type BudgetScope } from './budget-settings.js';
import { bodyLimitProblems, type HttpConfig } from './http-settings.js';
import { redisTargetOf } from './redis.js';
import type { Rate } from './units.js';

export { SETTINGS, type SettingName } from './settings.js';
export {
  keepResolved,
  LIBRARY_DEFAULTS,
  resolvedOf,
  settingDefault,
  type DefaultedSetting,
} from './defaults.js';
export { ConfigError, type SettingProblem } from './errors.js';
export { SCOPES, type HttpConfig, type Scope, type ScopeTokens } from './http-settings.js';
export { formatDuration, parseDurationMs, parseRate, type Rate } from './units.js';
export { orgShare, type BudgetScope } from './budget-settings.js';
export { clearTextApiHost } from './api-url.js';
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
export interface Config extends HttpConfig {
  /**
   * `REDIS_URL` (one URL, or a cluster's seed nodes), or with Sentinel the address made of
   * `REDIS_SENTINELS` and `REDIS_SENTINEL_NAME` (`redis-sentinel://...`, see config/redis-address.ts).
   */
  readonly redisUrl: string | undefined;
  readonly durability: DurabilitySetting;
  /** `REDIS_CLUSTER`, or a list of seed nodes: `redisUrl` names nodes of a Redis Cluster. */
  readonly redisCluster: boolean;
  /** `DISPATCH_SHARDS`: how many shards the keyspace is split into (see `shardLayout`). */
  readonly shardCount: number;
  /**
   * Whether `DISPATCH_SHARDS` was set: when not, the tools (`status`, `cancel`, `project ...`, the
   * intake's producer) use the count the fleet recorded in Redis instead of the default.
   */
  readonly shardCountSet: boolean;
  /** `SHARDS`: the shards this process serves, ascending; every shard when unset. */
  readonly servedShards: readonly number[];
  readonly agentApiUrl: string;
  /** From `AGENT_API_KEY`, or read from `agentApiKeyFile` when that is set. */
  readonly agentApiKey: string | undefined;
  /** `AGENT_API_KEY_FILE`: where the key is re-read from on SIGHUP, on change, before probes. */
  readonly agentApiKeyFile: string | undefined;
  readonly prefix: string;
  readonly sendRateLimit: Rate;
  readonly budgetScope: BudgetScope;
  readonly createRateLimit: Rate;
  /**
   * `ORG_RATE_LIMIT`; unset: none. The whole fleet's in the deployment's config, the shard's share
   * in a shard's (`shardConfig`).
   */
  readonly orgRateLimit: Rate | undefined;
  /** `PROJECT_BACKLOG_MAX`: the queued follow-ups a project may have; unset: no limit. */
  readonly projectBacklogMax: number | undefined;
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
  /** `DEAD_LETTER_RETENTION`: how long a dead letter keeps its prompt for a redrive. */
  readonly deadLetterRetentionMs: number;
  readonly repairGraceMs: number;
  readonly shutdownTimeoutMs: number;
  readonly dashboardAllowRetries: boolean;
  /** `DASHBOARD_ALLOW_CONTROLS`: the follow-ups page may pause, resume and cancel. */
  readonly dashboardAllowControls: boolean;
  /** `WEBHOOK_URL` and `WEBHOOK_SECRET`: the static webhook endpoint, set together or not at all. */
  readonly webhookUrl: string | undefined;
  readonly webhookSecret: string | undefined;
  readonly webhookMaxAgeMs: number;
  readonly webhookTimeoutMs: number;
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
        (name === 'AGENT_API_KEY' &&
          (overrides.AGENT_API_KEY_FILE ?? nonEmpty(env['AGENT_API_KEY_FILE'])) !== undefined) ||
        (name === 'REDIS_URL' && nonEmpty(overrides.REDIS_SENTINELS ?? env['REDIS_SENTINELS']));
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
  const clusterSet = (overrides.REDIS_CLUSTER ?? nonEmpty(env['REDIS_CLUSTER'])) !== undefined;
  const target = redisTargetOf(parsed, clusterSet, problems);
  const servedShards = problems.length > 0 ? [] : shardsOf(p, problems);
  if (problems.length === 0)
    problems.push(
      ...webhookPairProblems(p.WEBHOOK_URL, p.WEBHOOK_SECRET),
      ...orgRateProblems(p.ORG_RATE_LIMIT, p.DISPATCH_SHARDS),
      ...bodyLimitProblems(p.HTTP_BODY_MAX, p.HTTP_BODY_INFLIGHT_MAX),
    );
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    redisUrl: target.redisUrl,
    durability: Object.freeze(p.REDIS_DURABILITY),
    redisCluster: target.redisCluster,
    shardCount: p.DISPATCH_SHARDS,
    shardCountSet: (overrides.DISPATCH_SHARDS ?? nonEmpty(env['DISPATCH_SHARDS'])) !== undefined,
    servedShards,
    agentApiUrl: p.AGENT_API_URL.replace(/\/+$/, ''),
    agentApiKey,
    agentApiKeyFile: p.AGENT_API_KEY_FILE,
    prefix: p.DISPATCH_PREFIX,
    sendRateLimit: Object.freeze(p.SEND_RATE_LIMIT),
    budgetScope: p.BUDGET_SCOPE,
    createRateLimit: Object.freeze(p.CREATE_RATE_LIMIT),
    orgRateLimit: p.ORG_RATE_LIMIT && Object.freeze(p.ORG_RATE_LIMIT),
    projectBacklogMax: p.PROJECT_BACKLOG_MAX,
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
    deadLetterRetentionMs: p.DEAD_LETTER_RETENTION,
    repairGraceMs: p.REPAIR_GRACE,
    shutdownTimeoutMs: p.SHUTDOWN_TIMEOUT,
    tokens: Object.freeze({
      intake: p.INTAKE_TOKEN ?? [],
      events: p.EVENTS_TOKEN ?? [],
      operator: p.OPERATOR_TOKEN ?? [],
      dashboard: p.DASHBOARD_TOKEN ?? [],
    }),
    metricsTokens: p.METRICS_TOKEN ?? [],
    httpHost: p.HTTP_HOST,
    httpBodyMaxBytes: p.HTTP_BODY_MAX,
    httpBodyInflightMaxBytes: p.HTTP_BODY_INFLIGHT_MAX,
    trustProxy: p.TRUST_PROXY,
    dashboardAllowRetries: p.DASHBOARD_ALLOW_RETRIES,
    dashboardAllowControls: p.DASHBOARD_ALLOW_CONTROLS,
    webhookUrl: p.WEBHOOK_URL,
    webhookSecret: p.WEBHOOK_SECRET?.trim(),
    webhookMaxAgeMs: p.WEBHOOK_MAX_AGE,
    webhookTimeoutMs: p.WEBHOOK_TIMEOUT,
  });
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
