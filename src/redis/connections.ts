import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

/**
 * Redis connections by role. Producers fail fast when Redis is down, so a caller learns at once
 * that its follow-up was not accepted; workers and pollers wait and reconnect by themselves.
 */
export type ConnectionRole = 'producer' | 'worker';

const ROLE_OPTIONS: Record<ConnectionRole, RedisOptions> = {
  producer: { enableOfflineQueue: false, maxRetriesPerRequest: 1 },
  worker: { maxRetriesPerRequest: null, enableReadyCheck: true },
};

/** Where to connect: `REDIS_URL`, and whether it is the seed node of a cluster (`REDIS_CLUSTER`). */
export interface RedisTarget {
  readonly redisUrl: string | undefined;
  readonly redisCluster?: boolean;
}

/** Reconnects back off up to 2 s, so a Redis restart is noticed within seconds, not minutes. */
const retryStrategy = (times: number) => Math.min(100 * 2 ** Math.min(times, 5), 2_000);

/**
 * Opens a connection for `role`. `name` shows in `CLIENT LIST`. With `target.redisCluster` it is
 * an ioredis `Cluster` seeded from the URL: it follows MOVED/ASK redirections and reconnects to
 * each master by itself. The Cluster is typed as `Redis` on purpose: it answers every command the
 * service sends (each script's keys share one slot, see keys.ts), BullMQ recognises it at run time,
 * and every caller stays one type whatever the deployment.
 */
export function connect(target: RedisTarget | string, role: ConnectionRole, name: string): Redis {
  const { redisUrl = '', redisCluster = false } =
    typeof target === 'string' ? { redisUrl: target } : target;
  const options: RedisOptions = {
    ...ROLE_OPTIONS[role],
    connectionName: `agent-dispatch:${name}`,
    retryStrategy,
  };
  if (!redisCluster) return new Redis(redisUrl, options);
  return new Cluster(
    [seedOf(redisUrl)],
    clusterOptions(redisUrl, role, options),
  ) as unknown as Redis;
}

/** The seed node of a cluster URL: host and port only; credentials go to every node below. */
function seedOf(redisUrl: string): { host: string; port: number } {
  const url = new URL(redisUrl);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) };
}

/**
 * The options BullMQ documents for a cluster: the per-node options (credentials and TLS of the
 * URL, the role's retry policy) in `redisOptions`; the role's offline queue and ready check on the
 * Cluster itself, which also keeps retrying to reach the cluster at the same backoff.
 */
function clusterOptions(
  redisUrl: string,
  role: ConnectionRole,
  node: RedisOptions,
): ClusterOptions {
  const url = new URL(redisUrl);
  return {
    redisOptions: {
      ...node,
      username: url.username ? decodeURIComponent(url.username) : undefined,
      password: url.password ? decodeURIComponent(url.password) : undefined,
      tls: url.protocol === 'rediss:' ? {} : undefined,
    },
    enableOfflineQueue: role !== 'producer',
    enableReadyCheck: true,
    clusterRetryStrategy: retryStrategy,
    // A master restarting without a replica answers CLUSTERDOWN until it is back: keep retrying.
    retryDelayOnClusterDown: 200,
    scaleReads: 'master',
  };
}

/**
 * A new connection like `redis` with `options` on top: `Redis#duplicate(options)` for a single
 * Redis; for a Cluster (whose `duplicate` takes startup nodes first) the options go to every node.
 */
export function duplicate(redis: Redis, options: RedisOptions): Redis {
  if (!redis.isCluster) return redis.duplicate(options);
  const cluster = redis as unknown as Cluster;
  const { enableOfflineQueue, ...node } = options;
  return cluster.duplicate(undefined, {
    redisOptions: { ...cluster.options.redisOptions, ...node },
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
  }) as unknown as Redis;
}

/**
 * The servers behind `redis`, for what each says of itself (INFO, CONFIG): `redis` itself, or
 * every master of a cluster, asked for once the cluster client is connected and knows its nodes.
 */
export async function mastersOf(redis: Redis): Promise<Redis[]> {
  if (!redis.isCluster) return [redis];
  await redis.ping();
  const masters = (redis as unknown as Cluster).nodes('master');
  if (masters.length === 0) throw new Error('the cluster has no master to ask');
  return masters;
}

/**
 * One server setting (CONFIG GET); `undefined` where CONFIG is refused, as managed services often
 * do, or the server does not know the name.
 */
export async function configValue(node: Redis, name: string): Promise<string | undefined> {
  const reply = (await node.config('GET', name).catch(() => [])) as string[];
  return reply[1];
}

/** Network error codes of a connection that broke under a command. */
const CONNECTION_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN']);

/**
 * Whether `err` says the connection failed under a command, so the command may or may not have
 * run: ioredis's `MaxRetriesPerRequestError`, a socket error code, or its "Connection is closed."
 * (an Error with no code or class of its own, so its text is the only sign).
 */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'MaxRetriesPerRequestError') return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  return err.message.startsWith('Connection is closed');
}
