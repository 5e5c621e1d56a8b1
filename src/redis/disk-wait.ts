import type { Cluster, Redis } from 'ioredis';
import type { DurabilityAssessment } from './durability.js';
import { forgetReplicaCount, replicasToWaitFor } from './replica-count.js';
import { keySlot } from './slot.js';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * The wait for the disk, as every role runs it (`REDIS_DURABILITY`, see durability.ts): mark the
 * connection before a write ({@link beforeWrite}), wait for WAITAOF on it after
 * ({@link afterWrite}). WAITAOF speaks for the earlier writes of its own connection only. On a
 * single Redis that is the client's one connection. On a cluster the client holds one connection
 * per master and sends each command to the master of its keys' slot, so the wait for a shard's
 * write must go to the connection of the master that serves the shard's slot: the mark finds it
 * (from the client's slot map) before the write, and the wait refuses to vouch when the
 * connection was re-established or the slot moved since.
 */

/** What a role waits for after a write that a crash must not undo. */
export interface DiskWait {
  /**
   * How this server keeps acknowledged writes (`assessDurability`). Only `waitaof` waits; a
   * rejected assessment marks the write (it may wait), and the wait asks again.
   */
  readonly assessment: () => Promise<Pick<DurabilityAssessment, 'mode' | 'replicas' | 'strict'>>;
  /** WAITAOF's timeout, in milliseconds. */
  readonly timeoutMs: number;
}

/**
 * Marks a write of `key` about to go through `redis`, when `wait` may wait for it; `undefined`
 * when nothing is waited for (no `wait`, or a server that keeps the write without WAITAOF): then
 * the write costs no lookup, and no wait for a node's connection.
 */
export async function beforeWrite(
  wait: DiskWait | undefined,
  redis: Redis,
  key: string,
): Promise<WriteMark | undefined> {
  if (!wait) return undefined;
  const mode = await wait.assessment().then(
    (a) => a.mode,
    () => 'unknown',
  );
  if (mode !== 'waitaof' && mode !== 'unknown') return undefined;
  return markWrite(redis, key);
}

/**
 * Waits until the write marked `mark` is on disk, as `wait` asks, on the connection that took
 * it. Throws {@link NotDurableError} when it is not confirmed (a write that should have been
 * marked and was not, included): the caller must not go on as if it were kept.
 */
export async function afterWrite(
  wait: DiskWait | undefined,
  mark: WriteMark | undefined,
): Promise<void> {
  if (!wait) return;
  const assessment = await wait.assessment();
  if (assessment.mode !== 'waitaof') return;
  if (!mark) {
    throw new NotDurableError(
      'Redis did not confirm the write on disk: it was not marked before it was sent',
    );
  }
  await waitForDisk(mark, assessment, wait.timeoutMs);
}

/**
 * Runs `write`, whose commands go through `redis` (`key`: one of the keys it writes), and waits
 * until it is on disk as `wait` asks ({@link beforeWrite}, then {@link afterWrite}): for a change
 * a caller is told about, which a crash must not undo once told. Throws {@link NotDurableError}
 * after the write when it is not confirmed.
 */
export async function durably<T>(
  wait: DiskWait | undefined,
  redis: Redis,
  key: string,
  write: () => Promise<T>,
): Promise<T> {
  const mark = await beforeWrite(wait, redis, key);
  const result = await write();
  await afterWrite(wait, mark);
  return result;
}

/**
 * {@link afterWrite}, answering why the write is not confirmed on disk (`NotDurableError`'s
 * message), or `undefined` when it is or nothing is asked. Other failures reject.
 */
export async function notOnDisk(
  wait: DiskWait | undefined,
  mark: WriteMark | undefined,
): Promise<string | undefined> {
  try {
    await afterWrite(wait, mark);
    return undefined;
  } catch (err) {
    if (err instanceof NotDurableError) return err.message;
    throw err;
  }
}

/**
 * A write could not be made durable as `REDIS_DURABILITY` asks (WAITAOF timed out or fell short,
 * or the server cannot keep the promise and the setting is strict): nothing that depends on it
 * went ahead. Code `not_durable`.
 */
export class NotDurableError extends AgentDispatchError {
  readonly code = 'not_durable';
  constructor(message: string) {
    super(message);
    this.name = 'NotDurableError';
  }
}

/**
 * Waits until the write marked by `mark` (and every earlier write of its connection) is fsynced:
 * WAITAOF 1 N on the connection that took it (on a cluster, the master of the write's slot), at
 * most `timeoutMs`. Does nothing unless the assessment is `waitaof`. Throws
 * {@link NotDurableError} when WAITAOF timed out or reported fewer copies than asked, or when the
 * master was unknown, its connection was re-established, or the slot moved since the mark: the
 * caller must not go on as if it were kept.
 */
export async function waitForDisk(
  mark: WriteMark,
  assessment: Pick<DurabilityAssessment, 'mode' | 'replicas' | 'strict'>,
  timeoutMs: number,
): Promise<void> {
  if (assessment.mode !== 'waitaof') return;
  const { node } = mark;
  if (!node) {
    throw new NotDurableError(
      'Redis did not confirm the write on disk: no master of its slot was known when it was sent',
    );
  }
  const wanted = await replicasToWaitFor(node, assessment);
  const reply = (await node.call('WAITAOF', 1, wanted, timeoutMs)) as [number, number];
  const [local, replicas] = reply;
  if (local < 1 || replicas < wanted) {
    // A replica may have gone since it was counted: count again before the next wait.
    forgetReplicaCount(node);
    throw new NotDurableError(
      `Redis did not confirm the write on disk: WAITAOF answered ${local} local and ${replicas} replica fsync(s) within ${timeoutMs} ms`,
    );
  }
  // WAITAOF speaks for the writes of its own connection only. One sent again after a reconnect
  // (ioredis resends what was in flight) runs on a new connection and vouches for nothing earlier;
  // a write redirected to another master (the slot moved) is not on this one's disk.
  if (connectionOf(node) !== mark.connection || nodeConnection(mark.redis, mark.key) !== node) {
    throw new NotDurableError(
      'Redis did not confirm the write on disk: the connection was re-established (or the slot moved) after the write, so WAITAOF cannot vouch for it',
    );
  }
}

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
