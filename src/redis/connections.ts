import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { parseRedisAddress, type HostPort } from '../config/redis-address.js';

/**
 * Redis connections by role. Producers fail fast when Redis is down, so a caller learns at once
 * that its follow-up was not accepted; workers and pollers wait and reconnect by themselves.
 */
export type ConnectionRole = 'producer' | 'worker';

const ROLE_OPTIONS: Record<ConnectionRole, RedisOptions> = {
  producer: { enableOfflineQueue: false, maxRetriesPerRequest: 1 },
  worker: { maxRetriesPerRequest: null, enableReadyCheck: true },
};

/**
 * Where to connect: `REDIS_URL` (one URL, or a cluster's seed nodes), or the Sentinel form the
 * config makes of `REDIS_SENTINELS` (see address.ts); and whether it is a cluster (`REDIS_CLUSTER`;
 * a list of seed nodes is one whatever this says).
 */
export interface RedisTarget {
  readonly redisUrl: string | undefined;
  readonly redisCluster?: boolean;
}

/** Reconnects back off up to 2 s, so a Redis restart is noticed within seconds, not minutes. */
const retryStrategy = (times: number) => Math.min(100 * 2 ** Math.min(times, 5), 2_000);

/**
 * Opens a connection for `role`. `name` shows in `CLIENT LIST`. For a cluster it is an ioredis
 * `Cluster` seeded from every node the address lists: it follows MOVED/ASK redirections, and a
 * seed that is down (its master killed) does not keep it from the others. The Cluster is typed as
 * `Redis` on purpose: it answers every command the service sends (each script's keys share one
 * slot, see keys.ts), BullMQ recognises it at run time, and every caller stays one type whatever
 * the deployment. With Sentinel it is a `Redis` that asks the sentinels for the primary, and
 * again whenever the connection drops or the sentinels announce a failover.
 */
export function connect(target: RedisTarget | string, role: ConnectionRole, name: string): Redis {
  const { redisUrl = '', redisCluster = false } =
    typeof target === 'string' ? { redisUrl: target } : target;
  const options: RedisOptions = {
    ...ROLE_OPTIONS[role],
    connectionName: `agent-dispatch:${name}`,
    retryStrategy,
  };
  // No address: ioredis's default (localhost:6379).
  if (redisUrl === '') return new Redis(options);
  const address = parseRedisAddress(redisUrl);
  if (address.kind === 'sentinel') {
    return new Redis({
      ...options,
      sentinels: [...address.sentinels],
      name: address.name,
      // Subscribes to the sentinels' +switch-master: the new primary is used at once.
      failoverDetector: true,
    });
  }
  if (address.kind === 'single' && !redisCluster) return new Redis(redisUrl, options);
  const url = address.kind === 'cluster' ? address.url : new URL(redisUrl);
  const seeds = address.kind === 'cluster' ? [...address.seeds] : [seedOf(url)];
  const cluster = new Cluster(seeds, clusterOptions(url, role, options));
  return followTopology(cluster, seeds) as unknown as Redis;
}

/** ioredis keeps a Cluster's startup nodes in a field its types call private. */
type Seeded = { startupNodes: HostPort[] };

/**
 * Makes `cluster` (and every duplicate of it, such as BullMQ's blocking connections) start again
 * from every node it has learned of, not only its seeds. A Cluster that reconnects from scratch
 * (BullMQ resets a blocking connection that failed under its command) dials its startup nodes
 * only: with the one seed of `REDIS_URL` killed it never connected again, and the Worker waited
 * on it for good while its queue filled.
 */
function followTopology(cluster: Cluster, seeds: readonly HostPort[]): Cluster {
  cluster.on('refresh', () => {
    const known = cluster.nodes().map((n) => ({ host: n.options.host, port: n.options.port }));
    const all = [...known, ...seeds].filter(
      (n): n is HostPort => n.host !== undefined && n.port !== undefined,
    );
    const unique = [...new Map(all.map((n) => [`${n.host}:${n.port}`, n])).values()];
    (cluster as unknown as Seeded).startupNodes = unique;
  });
  const duplicate = cluster.duplicate.bind(cluster);
  cluster.duplicate = (nodes, options) => followTopology(duplicate(nodes, options), seeds);
  settleConnect(cluster);
  endAfterDisconnect(cluster);
  return cluster;
}

/** What {@link endAfterDisconnect} reads of a Cluster besides its types. */
type Closing = { manuallyClosing: boolean; setStatus(status: string): void };

/**
 * Keeps a disconnected Cluster ended. After `disconnect()` ioredis's pool reports a drain for each
 * node whose socket ends, and each drain sets the status to `close`: one that comes after the
 * Cluster's `end` leaves it `close` for good, with nothing to end or reconnect it, and BullMQ,
 * which then waits for `ready` or `end` to reconnect a Worker's blocking connection, waits for
 * ever. Such a status is set back to `end`.
 */
function endAfterDisconnect(cluster: Cluster): void {
  cluster.on('close', () => {
    setImmediate(() => {
      const closing = cluster as unknown as Closing;
      if (cluster.status === 'close' && closing.manuallyClosing) closing.setStatus('end');
    });
  });
}

/**
 * Makes `cluster.connect()` settle when the cluster is ready (or has ended). ioredis's own promise
 * never settles when its ready check fails: a node answers `cluster_state:fail`, as every node
 * does between a master's death and its replica's promotion, and the Cluster disconnects and
 * reconnects by itself, leaving that first promise pending for good. BullMQ awaits it when it
 * resets a Worker's blocking connection, and that Worker never fetched a job again.
 */
function settleConnect(cluster: Cluster): void {
  const connect = cluster.connect.bind(cluster);
  // Every connect not settled yet: ioredis's own reconnects call it too, so there can be many.
  const waiting = new Set<{ resolve(): void; reject(err: unknown): void }>();
  cluster.on('ready', () => {
    for (const waiter of waiting) waiter.resolve();
    waiting.clear();
  });
  cluster.on('end', () => {
    // An `end` of the connection before this one (its event comes a tick later) is not ours.
    if (cluster.status !== 'end') return;
    for (const waiter of waiting) waiter.reject(new Error('Connection is closed.'));
    waiting.clear();
  });
  cluster.connect = () =>
    new Promise<void>((resolve, reject) => {
      const waiter = { resolve, reject };
      waiting.add(waiter);
      connect()
        .then(resolve, reject)
        .finally(() => waiting.delete(waiter));
    });
}

/**
 * Plain connections to the servers an address names, for what a server says of itself (its
 * cluster mode): one per seed node of a list, or one to the Sentinel's primary or the one URL.
 */
export function serverConnections(redisUrl: string, options: RedisOptions): Redis[] {
  const address = parseRedisAddress(redisUrl);
  if (address.kind === 'single') return [new Redis(redisUrl, options)];
  if (address.kind === 'sentinel')
    return [new Redis({ ...options, sentinels: [...address.sentinels], name: address.name })];
  return address.seeds.map(
    (seed) => new Redis({ ...options, ...credentialsOf(address.url), ...seed }),
  );
}

/** The seed node of a cluster URL: host and port only; credentials go to every node below. */
function seedOf(url: URL): { host: string; port: number } {
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) };
}

/** The credentials and TLS a URL gives every node of a cluster. */
function credentialsOf(url: URL): RedisOptions {
  return {
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    tls: url.protocol === 'rediss:' ? {} : undefined,
  };
}

/**
 * The options BullMQ documents for a cluster: the per-node options (credentials and TLS of the
 * URL, the role's retry policy) in `redisOptions`; the role's offline queue and ready check on the
 * Cluster itself, which also keeps retrying to reach the cluster at the same backoff.
 */
function clusterOptions(url: URL, role: ConnectionRole, node: RedisOptions): ClusterOptions {
  return {
    redisOptions: { ...node, ...credentialsOf(url) },
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
 * Redis; for a Cluster (whose `duplicate` takes startup nodes first) the options go to every node,
 * and the nodes it knows now are the seeds.
 */
export function duplicate(redis: Redis, options: RedisOptions): Redis {
  if (!redis.isCluster) return redis.duplicate(options);
  const cluster = redis as unknown as Cluster;
  const { enableOfflineQueue, ...node } = options;
  // Seeded from every node it knows now, not only the seeds it started from (one may be down).
  const known = cluster.nodes().map((n) => ({ host: n.options.host, port: n.options.port }));
  return cluster.duplicate(known, {
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
