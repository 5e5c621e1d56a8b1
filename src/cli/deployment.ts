import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import { DispatchStore } from '../store/store.js';
import { configValue, connect, mastersOf, serverConnections } from '../redis/connections.js';
import { LISTPACK_VALUE_BYTES } from './embedded-redis.js';
import { keysFor, shardLayout } from '../redis/keys.js';
import {
  LayoutError,
  checkClusterMode,
  isClusterNode,
  recordedShardCount,
  recordShardCount,
  shardCountMismatch,
} from '../redis/layout.js';
import type { Logger } from '../telemetry/logger.js';
import { within } from '../time/deadline.js';
import { LIFECYCLE } from '../telemetry/names.js';

/**
 * Checks, before a role process starts, that the Redis agrees with the deployment's settings:
 * `REDIS_CLUSTER` with the server's cluster mode, `DISPATCH_SHARDS` with the count its unfinished
 * follow-ups were written with. Waits for Redis as the roles would (a fleet may start first), until
 * `signal` aborts. Throws `LayoutError` (exit 2) on a mismatch; records the count otherwise. Then
 * notes, as information, a server that would keep sent follow-ups' records loosely
 * ({@link noteRecordEncoding}).
 */
export async function verifyDeployment(
  config: Config,
  logger: Logger,
  signal: AbortSignal,
): Promise<void> {
  // One plain connection per seed node of a list: the first that answers says (one may be down).
  const nodes = serverConnections(config.redisUrl ?? '', {
    maxRetriesPerRequest: null,
    retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2_000),
  });
  let warned = false;
  for (const node of nodes)
    node.on('error', (err: Error) => {
      if (!warned) logger.warn({ err }, LIFECYCLE.redisError);
      warned = true;
    });
  const stop = () => nodes.forEach((node) => node.disconnect());
  signal.addEventListener('abort', stop, { once: true });
  try {
    // Queued until Redis answers (no retry limit), as a role's first command would be.
    const cluster = await Promise.any(nodes.map(isClusterNode)).catch((err: unknown) => {
      if (signal.aborted) return undefined;
      throw err instanceof AggregateError ? err.errors[0] : err;
    });
    if (cluster === undefined) return;
    checkClusterMode(config.redisCluster, cluster);
  } finally {
    signal.removeEventListener('abort', stop);
    stop();
  }
  const redis = connect(config, 'worker', 'layout');
  redis.on('error', () => {
    // Reported above; the commands below reject if it lasts.
  });
  try {
    await checkShardCount(redis, config);
    await noteRecordEncoding(redis, logger);
  } finally {
    redis.disconnect();
  }
}

/** How long the start waits for {@link noteRecordEncoding}'s reading at most. */
const NOTE_TIMEOUT_MS = 2_000;

/**
 * Says once, at start, when the server's `hash-max-listpack-value` is below the
 * {@link LISTPACK_VALUE_BYTES} of the servers we ship: it then keeps the record of every sent
 * follow-up (which holds the agent job's snapshot) as a hashtable instead of a listpack, for
 * `DISPATCH_RETENTION` after the event. A hint, not a fault: nothing is said where CONFIG GET is
 * refused (managed services) or does not know the name. A record holding a `meta` or an id longer
 * than the setting is a hashtable whatever the snapshot.
 */
async function noteRecordEncoding(redis: Redis, logger: Logger): Promise<void> {
  // A hint must not hold up the start: past NOTE_TIMEOUT_MS it is left unsaid.
  const reading = listpackValueBytes(redis).catch(() => undefined);
  const value = await within(reading, NOTE_TIMEOUT_MS, () => undefined);
  if (value === undefined || value >= LISTPACK_VALUE_BYTES) return;
  logger.info(
    { setting: 'hash-max-listpack-value', value, recommended: LISTPACK_VALUE_BYTES },
    `${LIFECYCLE.redisRecordsNotCompact}: Redis keeps hash values of up to ${value} bytes ` +
      "compact; a sent follow-up's record holds the agent job's snapshot (about 250 bytes), so " +
      `each one takes about twice the memory until it expires; set hash-max-listpack-value to ` +
      `${LISTPACK_VALUE_BYTES} (docs/operations.md, "What the service costs Redis")`,
  );
}

/**
 * The server's `hash-max-listpack-value`: on a cluster the lowest of its masters' (CONFIG has no
 * key, so a cluster client would ask any one of them); `undefined` where no server tells it.
 */
async function listpackValueBytes(redis: Redis): Promise<number | undefined> {
  const values = await Promise.all(
    (await mastersOf(redis)).map(async (node) =>
      Number((await configValue(node, 'hash-max-listpack-value')) ?? Number.NaN),
    ),
  );
  const known = values.filter((v) => Number.isFinite(v));
  return known.length > 0 ? Math.min(...known) : undefined;
}

/**
 * Refuses a shard count other than the recorded one while the recorded layout still has
 * unfinished follow-ups or project controls (a pause left there would not hold); otherwise
 * records this one. A single Redis without a record was written with one shard, if at all: by a
 * tool (a producer, the CLI) before any role started.
 */
async function checkShardCount(redis: Redis, config: Config): Promise<void> {
  const { prefix, eventsStream, shardCount, redisCluster } = config;
  const recorded = await recordedShardCount(redis, prefix);
  const old = recorded ?? (redisCluster ? undefined : 1);
  if (old !== undefined && old !== shardCount) {
    const layout = shardLayout(prefix, eventsStream, old, redisCluster);
    const open = await openIn(redis, layout);
    if (open > 0) throw shardCountMismatch(shardCount, old, open);
    const controlled = await controlledIn(redis, layout);
    if (controlled > 0) throw controlsLeftBehind(shardCount, old, controlled);
  }
  if (recorded !== shardCount) await recordShardCount(redis, prefix, shardCount);
}

/** Projects with a pause or a limit across the shards of a layout. */
async function controlledIn(redis: Redis, shards: readonly { prefix: string }[]): Promise<number> {
  const counts = await Promise.all(
    shards.map((s) => redis.scard(keysFor(s.prefix).controlledProjects)),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/** The refusal of a start whose `DISPATCH_SHARDS` would leave project controls behind. */
function controlsLeftBehind(configured: number, old: number, projects: number): LayoutError {
  return new LayoutError(
    'DISPATCH_SHARDS',
    `is ${configured}, but this Redis holds the controls (pause, limit) of ${projects} project${projects === 1 ? '' : 's'} ` +
      `set with DISPATCH_SHARDS=${old}, which would not hold at ${configured}. Note them (project show), ` +
      `clear them with DISPATCH_SHARDS=${old} (project resume, project limit --clear), start with ${configured}, then set them again`,
  );
}

/** Unfinished follow-ups across the shards of a layout. */
async function openIn(redis: Redis, shards: readonly { prefix: string }[]): Promise<number> {
  const counts = await Promise.all(
    shards.map((s) =>
      new DispatchStore(redis, keysFor(s.prefix), {
        eventsStream: '',
        eventsMaxLen: 0,
        retentionMs: 0,
      }).open.count(),
    ),
  );
  return counts.reduce((a, b) => a + b, 0);
}
