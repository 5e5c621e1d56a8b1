import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { loadConfig, type Config, type SettingName } from '../../src/config/index.js';
import { shardLayout } from '../../src/redis/keys.js';
import { hooksOf, type HookScope } from './hooks.js';

/** A private corner of the shared test Redis: its own key prefix and events stream. */
export interface Namespace {
  readonly redisUrl: string;
  readonly prefix: string;
  readonly eventsStream: string;
  /** A client for assertions; closed by {@link Namespace.cleanup}. */
  readonly redis: Redis;
  /** A config for this namespace; `settings` are environment values layered over the defaults. */
  config(settings?: Partial<Record<SettingName, string>>): Config;
  /** The environment a child process (a CLI role) needs to work in this namespace. */
  env(settings?: Partial<Record<SettingName, string>>): Record<string, string>;
  /** Deletes every key of the namespace and closes the client. */
  cleanup(): Promise<void>;
}

/**
 * Creates a namespace with a random prefix, so tests never see each other's keys; on the run's
 * server, or on `redisUrl` (a test's private server).
 */
export function createNamespace(label = 'test', redisUrl = inject('redisUrl')): Namespace {
  const prefix = `t-${label}-${randomBytes(4).toString('hex')}`;
  const eventsStream = `${prefix}:events`;
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const base = {
    REDIS_URL: redisUrl,
    DISPATCH_PREFIX: prefix,
    EVENTS_STREAM: eventsStream,
    AGENT_API_KEY: 'test-key',
    LOG_LEVEL: 'warn',
  } satisfies Partial<Record<SettingName, string>>;
  return {
    redisUrl,
    prefix,
    eventsStream,
    redis,
    config: (settings = {}) => loadConfig({ ...base, ...settings }),
    env: (settings = {}) => ({ ...base, ...settings }),
    cleanup: async () => {
      await unlinkMatching(redis, `${prefix}:*`);
      await redis.quit();
    },
  };
}

/** Deletes every key that matches `pattern`, a SCAN page at a time. */
async function unlinkMatching(redis: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** How {@link useNamespace} scopes its namespace. */
export interface NamespaceUse {
  /** `each` (default): a fresh namespace per test; `all`: one for the whole describe (or file). */
  readonly scope?: HookScope;
  /** A simulator whose jobs and faults are reset with each new namespace. */
  readonly simulator?: () => { reset(): void };
  /**
   * The `DISPATCH_SHARDS` the test runs with: the keys of each shard (whose prefix is a hash tag
   * of its own, outside the namespace's) are deleted too.
   */
  readonly shards?: number;
}

/**
 * Registers the hooks that create a namespace `label` (and reset `simulator`) before each test, or
 * once before all, and clean it up after. Returns a getter, since the namespace exists only once
 * the hook ran. Register it before the hooks that use it: after-hooks run in reverse, so what a
 * test file starts on the namespace is closed before the namespace is cleaned up.
 */
export function useNamespace(label: string, use: NamespaceUse = {}): () => Namespace {
  const [before, after] = hooksOf(use.scope);
  let current: Namespace | undefined;
  before(() => {
    current = createNamespace(label);
    use.simulator?.().reset();
  });
  after(async () => {
    if (!current) return;
    const ns = current;
    current = undefined;
    if (use.shards !== undefined) {
      for (const shard of shardLayout(ns.prefix, ns.eventsStream, use.shards, false))
        await unlinkMatching(ns.redis, `${shard.prefix}*`);
    }
    await ns.cleanup();
  });
  return () => {
    if (!current)
      throw new Error(`useNamespace('${label}'): the namespace exists inside a test only`);
    return current;
  };
}

/** Runs `test` in a namespace `label` of its own, cleaned up after whatever `test` did. */
export async function withNamespace<T>(
  label: string,
  test: (ns: Namespace) => Promise<T>,
): Promise<T> {
  const ns = createNamespace(label);
  try {
    return await test(ns);
  } finally {
    await ns.cleanup();
  }
}

/** Polls `check` until it returns a value other than `undefined`, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined> | T | undefined,
  { timeoutMs = 20_000, intervalMs = 50, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: lastError });
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
