import type { Redis } from 'ioredis';
import { LIBRARY_DEFAULTS } from '../config/index.js';
import { parseRate, type Rate } from '../config/units.js';
import { connect } from '../redis/connections.js';
import type { ProducerOptions } from './api.js';
import { diskGuard, type DiskGuard } from './disk.js';
import { fleetOf, type Fleet } from './fleet.js';

/**
 * What the producer and `createAdmin` open alike: one fail-fast connection, the disk guard of
 * `REDIS_DURABILITY` on it, and the fleet's shards, so both read the same defaults.
 */

/** The options both tools share (`AdminOptions` has the same fields). */
export type ToolOptions = Pick<
  ProducerOptions,
  | 'redisUrl'
  | 'prefix'
  | 'eventsStream'
  | 'eventsMaxLen'
  | 'dispatchRetentionMs'
  | 'connection'
  | 'readyTimeoutMs'
  | 'shards'
  | 'cluster'
  | 'durability'
  | 'durabilityTimeoutMs'
  | 'projectBacklogMax'
  | 'sendRateLimit'
>;

/** A tool's connection (`options.connection` when given), its disk guard and its shards. */
export interface ToolParts {
  readonly redis: Redis;
  readonly disk: DiskGuard;
  readonly fleet: Fleet;
  /** The options as used: each one left out is `LIBRARY_DEFAULTS`' value (or the timeouts'). */
  readonly resolved: Readonly<Record<string, unknown>>;
}

/** Opens the parts of the tool named `name` (the connection's name) for `options`. */
export function openTool(options: ToolOptions, name: string): ToolParts {
  const resolved = {
    prefix: options.prefix ?? LIBRARY_DEFAULTS.prefix,
    eventsStream: options.eventsStream ?? LIBRARY_DEFAULTS.eventsStream,
    eventsMaxLen: options.eventsMaxLen ?? LIBRARY_DEFAULTS.eventsMaxLen,
    dispatchRetentionMs: options.dispatchRetentionMs ?? LIBRARY_DEFAULTS.dispatchRetentionMs,
    cluster: options.cluster ?? LIBRARY_DEFAULTS.cluster,
    durability: options.durability ?? LIBRARY_DEFAULTS.durability,
    // The count when neither the option nor the fleet's record gives one.
    shards: options.shards ?? LIBRARY_DEFAULTS.shards,
    durabilityTimeoutMs: options.durabilityTimeoutMs ?? 5_000,
    readyTimeoutMs: options.readyTimeoutMs ?? 5_000,
  };
  const { cluster } = resolved;
  const redis =
    options.connection ??
    connect({ redisUrl: options.redisUrl, redisCluster: cluster }, 'producer', name);
  redis.on('error', () => {
    // Failures reach the caller as rejected calls; the fail-fast connection never queues them.
  });
  const disk = diskGuard(resolved.durability, resolved.durabilityTimeoutMs, redis);
  const fleet = fleetOf(redis, {
    prefix: resolved.prefix,
    eventsStream: resolved.eventsStream,
    cluster,
    shards: options.shards,
    unsetShards: resolved.shards,
    ending: {
      eventsMaxLen: resolved.eventsMaxLen,
      retentionMs: resolved.dispatchRetentionMs,
      // A cancel or a control waits for the disk before it answers, as an enqueue does.
      durability: disk.wait,
      ...backlogOf(options),
    },
    readyTimeoutMs: resolved.readyTimeoutMs,
  });
  return { redis, disk, fleet, resolved };
}

/** The store's `backlog` option of `PROJECT_BACKLOG_MAX`; none when unset (or 0). */
function backlogOf({ projectBacklogMax: max, sendRateLimit }: ToolOptions): {
  backlog?: { max: number; rate: Rate };
} {
  if (!max) return {};
  if (!Number.isSafeInteger(max) || max < 1)
    throw new RangeError(`projectBacklogMax: expected a whole number of 1 or more, got ${max}`);
  const rate =
    typeof sendRateLimit === 'string'
      ? parseRate(sendRateLimit)
      : (sendRateLimit ?? LIBRARY_DEFAULTS.sendRateLimit);
  if (!rate)
    throw new RangeError(
      `sendRateLimit: expected N/DURATION such as 100/1h, got "${sendRateLimit}"`,
    );
  return { backlog: { max, rate } };
}
