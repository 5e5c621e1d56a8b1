import type { Cluster, Redis } from 'ioredis';
import { keySlot } from './slot.js';

/**
 * Where a write goes, for WAITAOF (see durability.ts), which speaks for the earlier writes of its
 * own connection only. On a single Redis that is the client's one connection. On a cluster the
 * client holds one connection per master and sends each command to the master of its keys' slot,
 * so the wait for a shard's write must go to the connection of the master that serves the shard's
 * slot: {@link markWrite} finds it (from the client's slot map) before the write, and the wait
 * refuses to vouch when the connection was re-established or the slot moved since.
 */

/** The connection that takes a write, and which of its connections it was (see `connectionOf`). */
export interface WriteMark {
  /** The client the write is sent through: a single Redis, or a Cluster. */
  readonly redis: Redis;
  /** A key of the write; on a cluster its slot names the master that takes it. */
  readonly key: string;
  /** The connection to that master (the client itself on a single Redis); unset when unknown. */
  readonly node: Redis | undefined;
  /** `connectionOf(node)` before the write. */
  readonly connection: number;
}

/**
 * Marks a write of `key` about to go through `redis`: its node's connection and connection
 * number. A cluster's connection to a master it has not used yet is opened first (ioredis opens
 * them lazily), so that opening it does not read as a reconnect after the write.
 */
export async function markWrite(redis: Redis, key: string): Promise<WriteMark> {
  const node = nodeConnection(redis, key);
  if (node && node !== redis) await untilConnected(node);
  return { redis, key, node, connection: node ? connectionOf(node) : -1 };
}

/** Longest wait for a cluster node's connection to open before a write is marked. */
const NODE_CONNECT_WAIT_MS = 1_000;

/**
 * Opens a cluster node's lazy connection, or waits (briefly) for one being opened. A failure
 * shows in the write itself; a connection opened after the mark makes the wait refuse to vouch.
 */
async function untilConnected(node: Redis): Promise<void> {
  connectionOf(node);
  if (node.status === 'wait') return node.connect().catch(() => {});
  if (node.status !== 'connecting' && node.status !== 'reconnecting') return;
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      node.off('connect', done).off('end', done);
      resolve();
    };
    const timer = setTimeout(done, NODE_CONNECT_WAIT_MS);
    node.once('connect', done).once('end', done);
  });
}

/**
 * The connection of `redis` that serves `key`'s slot: `redis` itself on a single Redis; on a
 * cluster, the client's connection to the slot's master in its current slot map (undefined while
 * the map has no master for it).
 */
export function nodeConnection(redis: Redis, key: string): Redis | undefined {
  if (!redis.isCluster) return redis;
  const cluster = redis as unknown as Cluster;
  const master = cluster.slots[keySlot(key)]?.[0];
  if (master === undefined) return undefined;
  return cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === master);
}

const connections = new WeakMap<Redis, { n: number }>();

/**
 * Which connection of `redis` (one node's client) is current: a number that changes on every
 * (re)connect. {@link markWrite} takes it before a write; the wait for the disk refuses to vouch
 * for a write made on an earlier connection.
 */
export function connectionOf(redis: Redis): number {
  let counter = connections.get(redis);
  if (!counter) {
    const created = { n: 0 };
    redis.on('connect', () => created.n++);
    connections.set(redis, created);
    counter = created;
  }
  return counter.n;
}
