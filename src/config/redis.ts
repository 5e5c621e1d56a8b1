import { z } from 'zod';
import {
  parseHostPorts,
  parseRedisAddress,
  RedisAddressError,
  sentinelAddress,
  type HostPort,
} from './redis-address.js';

/**
 * The settings that say where Redis is: `REDIS_URL` (one URL, or a cluster's seed nodes),
 * `REDIS_CLUSTER`, and Redis Sentinel (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`); their parsers
 * and the checks across them, each problem naming the setting to change.
 */

/** `REDIS_URL`: one URL, or a comma-separated list of a cluster's seed nodes. */
export const redisUrl = z.string().transform((text, ctx) => {
  try {
    const address = parseRedisAddress(text);
    if (address.kind !== 'sentinel') return text.trim();
  } catch (err) {
    if (!(err instanceof RedisAddressError)) throw err;
    // The URL may carry a password, so the message never echoes it.
    ctx.addIssue({
      code: 'custom',
      message: `${err.message}; expected a redis:// or rediss:// URL, or a cluster's seed nodes as redis://host:port,redis://host:port`,
    });
    return z.NEVER;
  }
  ctx.addIssue({ code: 'custom', message: 'use REDIS_SENTINELS for Redis Sentinel' });
  return z.NEVER;
});

/** `REDIS_SENTINELS`: `host:port,...`. */
export const sentinels = z.string().transform((text, ctx): readonly HostPort[] => {
  try {
    return parseHostPorts(text);
  } catch (err) {
    if (!(err instanceof RedisAddressError)) throw err;
    ctx.addIssue({
      code: 'custom',
      message: `${err.message}; expected the sentinels as host:port,host:port, got "${text}"`,
    });
    return z.NEVER;
  }
});

/** `REDIS_SENTINEL_NAME`: the name in the sentinels' `sentinel monitor NAME ...`. */
export const sentinelName = z.string().regex(/^[\w.:-]{1,100}$/, {
  message: 'expected the primary name of `sentinel monitor`: 1 to 100 letters, digits or _ - . :',
});

/** One problem with one setting (as `SettingProblem`). */
interface Problem {
  readonly setting: string;
  readonly message: string;
}

/**
 * Where to connect, from the settings: `redisUrl` is `REDIS_URL` or the Sentinel form of
 * address.ts; a list of seed nodes makes `redisCluster` true. `clusterSet`: `REDIS_CLUSTER` was
 * set at all (its default `false` does not contradict a list). Pushes a problem for each setting
 * that contradicts another.
 */
export function redisTargetOf(
  parsed: Partial<Record<string, unknown>>,
  clusterSet: boolean,
  problems: Problem[],
): { redisUrl: string | undefined; redisCluster: boolean } {
  const s = {
    url: parsed['REDIS_URL'] as string | undefined,
    cluster: parsed['REDIS_CLUSTER'] === true,
    sentinels: parsed['REDIS_SENTINELS'] as readonly HostPort[] | undefined,
    sentinelName: parsed['REDIS_SENTINEL_NAME'] as string | undefined,
  };
  // A setting that did not parse has its problem already: none more about its absence.
  const named = (setting: string) => problems.some((p) => p.setting === setting);
  if (s.sentinels === undefined) {
    if (s.sentinelName !== undefined && !named('REDIS_SENTINELS'))
      problems.push({
        setting: 'REDIS_SENTINELS',
        message: 'is required with REDIS_SENTINEL_NAME',
      });
    const seedList = s.url !== undefined && parseRedisAddress(s.url).kind === 'cluster';
    if (seedList && clusterSet && !s.cluster)
      problems.push({
        setting: 'REDIS_CLUSTER',
        message:
          'is false, but REDIS_URL lists several seed nodes, which only a Redis Cluster has: leave REDIS_CLUSTER unset (or true), or give REDIS_URL one URL',
      });
    return { redisUrl: s.url, redisCluster: s.cluster || seedList };
  }
  if (s.sentinelName === undefined && !named('REDIS_SENTINEL_NAME'))
    problems.push({
      setting: 'REDIS_SENTINEL_NAME',
      message: 'is required with REDIS_SENTINELS: the primary name of `sentinel monitor`',
    });
  if (s.url !== undefined)
    problems.push({
      setting: 'REDIS_SENTINELS',
      message: 'set REDIS_SENTINELS or REDIS_URL, not both: the sentinels say where the primary is',
    });
  if (s.cluster)
    problems.push({
      setting: 'REDIS_CLUSTER',
      message: 'must be false with REDIS_SENTINELS: Sentinel serves one primary, not a cluster',
    });
  return {
    redisUrl: sentinelAddress(s.sentinels, s.sentinelName ?? ''),
    redisCluster: false,
  };
}
