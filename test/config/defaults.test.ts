import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  LIBRARY_DEFAULTS,
  loadConfig,
  parseDurationMs,
  SETTINGS,
  settingDefault,
  type Config,
  type DefaultedSetting,
  type SettingName,
} from '../../src/config/index.js';

/** The `Config` field each setting with a default fills. */
const CONFIG_FIELD: Record<DefaultedSetting, keyof Config> = {
  REDIS_DURABILITY: 'durability',
  REDIS_CLUSTER: 'redisCluster',
  DISPATCH_SHARDS: 'shardCount',
  DEAD_LETTER_RETENTION: 'deadLetterRetentionMs',
  AGENT_API_URL: 'agentApiUrl',
  DISPATCH_PREFIX: 'prefix',
  SEND_RATE_LIMIT: 'sendRateLimit',
  WORKER_CONCURRENCY: 'workerConcurrency',
  POLL_INTERVAL: 'pollIntervalMs',
  EVENTS_STREAM: 'eventsStream',
  EVENTS_MAXLEN: 'eventsMaxLen',
  HTTP_PORT: 'httpPort',
  HTTP_HOST: 'httpHost',
  HTTP_BODY_MAX: 'httpBodyMaxBytes',
  HTTP_BODY_INFLIGHT_MAX: 'httpBodyInflightMaxBytes',
  TRUST_PROXY: 'trustProxy',
  LOG_LEVEL: 'logLevel',
  TRACK_TIMEOUT: 'trackTimeoutMs',
  ACTIVE_GRACE: 'activeGraceMs',
  POLL_MIN_INTERVAL: 'pollMinIntervalMs',
  POLL_MAX_INTERVAL: 'pollMaxIntervalMs',
  POLL_LEARN: 'pollLearn',
  POLL_CONCURRENCY: 'pollConcurrency',
  STALLED_TIMEOUT: 'stalledTimeoutMs',
  SEND_ATTEMPTS: 'sendAttempts',
  SEND_TIMEOUT: 'sendTimeoutMs',
  CONNECT_TIMEOUT: 'connectTimeoutMs',
  AMBIGUOUS_RESEND: 'ambiguousResend',
  PROMPT_MAX_BYTES: 'promptMaxBytes',
  DISPATCH_RETENTION: 'dispatchRetentionMs',
  REPAIR_GRACE: 'repairGraceMs',
  SHUTDOWN_TIMEOUT: 'shutdownTimeoutMs',
  DASHBOARD_ALLOW_RETRIES: 'dashboardAllowRetries',
  DASHBOARD_ALLOW_CONTROLS: 'dashboardAllowControls',
  WEBHOOK_MAX_AGE: 'webhookMaxAgeMs',
  WEBHOOK_TIMEOUT: 'webhookTimeoutMs',
};

/** The `Config` field each library default stands for. */
const LIBRARY_FIELD: Record<keyof typeof LIBRARY_DEFAULTS, keyof Config> = {
  prefix: 'prefix',
  eventsStream: 'eventsStream',
  eventsMaxLen: 'eventsMaxLen',
  dispatchRetentionMs: 'dispatchRetentionMs',
  promptMaxBytes: 'promptMaxBytes',
  sendAttempts: 'sendAttempts',
  shards: 'shardCount',
  cluster: 'redisCluster',
  durability: 'durability',
  sendRateLimit: 'sendRateLimit',
};

const defaulted = (Object.keys(SETTINGS) as SettingName[]).filter(
  (name): name is DefaultedSetting => 'default' in SETTINGS[name],
);

describe('one source for defaults', () => {
  const config = loadConfig({});

  it('gives every setting with a default its parsed default in Config', () => {
    expect(Object.keys(CONFIG_FIELD).sort()).toEqual([...defaulted].sort());
    for (const name of defaulted)
      expect(config[CONFIG_FIELD[name]], name).toEqual(settingDefault(name));
  });

  it("gives the library's options the defaults of the settings they stand for", () => {
    for (const [option, field] of Object.entries(LIBRARY_FIELD))
      expect(LIBRARY_DEFAULTS[option as keyof typeof LIBRARY_FIELD], option).toEqual(config[field]);
  });

  it('finds no default of a setting written again as a literal in src/', () => {
    expect(duplicatedDefaults()).toEqual([]);
  });
});

const SRC = join(import.meta.dirname, '../../src');
/** Where the defaults are written: the settings tables. */
const TABLES = ['config/settings.ts', 'config/http-settings.ts', 'config/webhook-settings.ts'];
/**
 * Literals that equal a setting's default by coincidence, each a different quantity: the text of
 * the line as written, and why it is not the setting's.
 */
const COINCIDENCES: readonly (readonly [text: string, why: string])[] = [
  ['options.promptMaxBytes ?? 0', "a store opened without PROMPT_MAX_BYTES: 0 is 'no limit'"],
  ['Sockets per origin. @defaultValue 64', "the agent API client's connections"],
  ['@defaultValue 1_000_000', "the simulator's request records"],
  ["@defaultValue '127.0.0.1'", "the simulator's host"],
  ["text('host') ?? '127.0.0.1'", "the simulator's host"],
  ["eventsStream: '',", 'a store that only counts (cli/deployment.ts) writes no event'],
  ['eventsMaxLen: 0,', 'a store that only counts (cli/deployment.ts) writes no event'],
  ['redisCluster: false,', 'Sentinel (config/redis.ts) serves one primary, never a cluster'],
  ['redisCluster = false } =', 'connect() given one URL as a string: a single server'],
];

/** The value of a literal as written in TypeScript or TSDoc: a string, or a (product of) number(s). */
function valueOf(literal: string): string | number | boolean | undefined {
  const text = literal.trim();
  const quoted = /^['`"](.*)['`"]$/.exec(text);
  if (quoted) return quoted[1];
  if (text === 'true' || text === 'false') return text === 'true';
  if (/^\d[\d_]*(\s*\*\s*\d[\d_]*)*$/.test(text))
    return text.split('*').reduce((product, n) => product * Number(n.replace(/_/g, '')), 1);
  return undefined;
}

/**
 * The defaults a literal could repeat unnoticed: the strings, as written and parsed, and the
 * counts and sizes past 1. A duration's milliseconds are left to the names (5000 or 30000 are
 * also the timeouts of many things that are no setting).
 */
function defaultValues(): Set<unknown> {
  const values = new Set<unknown>();
  for (const name of defaulted) {
    const raw = SETTINGS[name].default;
    const value: unknown = settingDefault(name);
    if (parseDurationMs(raw) !== undefined) continue;
    if (!/^(\d+|true|false)$/.test(raw)) values.add(raw);
    if ((typeof value === 'string' && value !== '') || (typeof value === 'number' && value > 1))
      values.add(value);
  }
  return values;
}

/**
 * Each default given in src/ (the tables aside) by a literal: as `?? literal`, a parameter's
 * `= literal`, `name: literal` or `@defaultValue literal`, where the name is a library option or a
 * `Config` field, or the value one of {@link defaultValues}.
 */
function duplicatedDefaults(): string[] {
  const values = defaultValues();
  const names = new Set<string>([...Object.keys(LIBRARY_DEFAULTS), ...Object.values(CONFIG_FIELD)]);
  const literal = String.raw`('[^']*'|\x60[^\x60]*\x60|\d[\d_]*(?:\s*\*\s*\d[\d_]*)*|true|false)`;
  const byValue = [
    new RegExp(String.raw`(\w*)\)?\s*\?\?=?\s*${literal}`, 'g'),
    new RegExp(String.raw`(\w+)\s*=\s*${literal}\s*[,)}]`, 'g'),
    new RegExp(String.raw`()@defaultValue\s+${literal}`, 'g'),
  ];
  const byName = [...byValue, new RegExp(String.raw`(\w+):\s*${literal}\s*[,}]`, 'g')];
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const path = relative(SRC, file);
    if (TABLES.includes(path)) continue;
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (COINCIDENCES.some(([text]) => line.includes(text))) return;
        const hit = byName.some((pattern, p) =>
          [...line.matchAll(pattern)].some(
            ([, name, text]) =>
              !(text ?? '').includes('${') &&
              (names.has(name ?? '') || (p < byValue.length && values.has(valueOf(text ?? '')))),
          ),
        );
        if (hit) found.push(`${path}:${i + 1}: ${line.trim()}`);
      });
  }
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  );
}
