import { describe, expect, it } from 'vitest';
import { createEventReader } from '../../src/index.js';
import { createAdmin, createProducer } from '../../src/producer/index.js';
import {
  LIBRARY_DEFAULTS,
  loadConfig,
  resolvedOf,
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
  BUDGET_SCOPE: 'budgetScope',
  CREATE_RATE_LIMIT: 'createRateLimit',
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
});

/**
 * The options each library object resolves when they are left out: every one that stands for a
 * setting is `LIBRARY_DEFAULTS`' value, read from what the object uses (`resolvedOf`), not from
 * its source text.
 */
describe('the library uses LIBRARY_DEFAULTS for each option left out', () => {
  // Nothing listens there: the objects connect lazily or fail in the background, never used.
  const redisUrl = 'redis://127.0.0.1:1';
  const picked = (keys: readonly (keyof typeof LIBRARY_DEFAULTS)[]) =>
    Object.fromEntries(keys.map((k) => [k, LIBRARY_DEFAULTS[k]]));
  const tool = [
    'prefix',
    'eventsStream',
    'eventsMaxLen',
    'dispatchRetentionMs',
    'cluster',
    'durability',
    'shards',
  ] as const;

  it.each([
    [
      'createProducer',
      () => createProducer({ redisUrl }),
      [...tool, 'promptMaxBytes', 'sendAttempts'],
    ],
    ['createAdmin', () => createAdmin({ redisUrl }), [...tool, 'sendRateLimit']],
    [
      'createEventReader',
      () => createEventReader({ redisUrl, group: 'g', consumer: 'c' }),
      ['prefix', 'eventsStream', 'cluster', 'shards'],
    ],
  ] as const)('%s', async (_, make, keys) => {
    const made = make();
    try {
      const resolved = resolvedOf(made);
      expect(resolved).toBeDefined();
      expect(Object.fromEntries(keys.map((k) => [k, resolved?.[k]]))).toEqual(picked(keys));
    } finally {
      await made.close();
    }
  });

  it('uses an option given as given, so the checks above can fail', async () => {
    const reader = createEventReader({
      redisUrl,
      group: 'g',
      consumer: 'c',
      prefix: 'x',
      shards: 3,
    });
    try {
      expect(resolvedOf(reader)).toMatchObject({ prefix: 'x', shards: 3 });
    } finally {
      await reader.close();
    }
  });

  it('covers every library default', () => {
    const covered = new Set(['promptMaxBytes', 'sendAttempts', 'sendRateLimit', ...tool]);
    expect(Object.keys(LIBRARY_DEFAULTS).filter((k) => !covered.has(k))).toEqual([]);
  });
});
