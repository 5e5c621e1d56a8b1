import type { Redis } from 'ioredis';
import { LISTPACK_VALUE_BYTES } from '../src/cli/embedded-redis.js';
import { keysFor, QUEUE_NAMES } from '../src/redis/keys.js';
import type { Namespace } from './context.js';
import { keyBytes, keyEncoding } from './probes.js';
import { bytes } from './stats.js';
import { BASELINE_QUEUE } from './workload.js';

/**
 * What a follow-up leaves in Redis after its event, per follow-up: MEMORY USAGE (every element
 * counted, `SAMPLES 0`) of each key it is kept in, the mean over the run's follow-ups. Ours keeps
 * the record (for `DISPATCH_RETENTION`), the completed BullMQ job and its entry in the queue's
 * completed set (1 hour or the last 10,000), and the event (until `EVENTS_MAXLEN`); the baseline
 * keeps its completed BullMQ job, the prompt in its data, and the same completed-set entry.
 */

/** The mean MEMORY USAGE of `keys`, and the encoding of the first. */
async function meanOf(redis: Redis, keys: readonly string[]) {
  let total = 0;
  for (const key of keys) total += await keyBytes(redis, key);
  const encoding = keys[0] ? await keyEncoding(redis, keys[0]) : 'none';
  return { bytes: keys.length > 0 ? total / keys.length : 0, encoding };
}

/** Every key that starts with `prefix` (SCAN: the run's namespace holds a few thousand keys). */
async function keysStartingWith(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/**
 * What `key` (a hash) would weigh with Redis's `hash-max-listpack-value` at
 * {@link LISTPACK_VALUE_BYTES}: DUMPed, then RESTOREd under a scratch key with the setting raised,
 * which loads it as a listpack when every field fits. The setting is put back at once.
 */
async function asListpack(redis: Redis, key: string): Promise<number> {
  const dump = await redis.dumpBuffer(key);
  if (!dump) return 0;
  const [, before] = (await redis.config('GET', 'hash-max-listpack-value')) as [string, string];
  const scratch = `${key}:listpack-probe`;
  await redis.config('SET', 'hash-max-listpack-value', String(LISTPACK_VALUE_BYTES));
  try {
    await redis.restore(scratch, 0, dump, 'REPLACE');
    return await keyBytes(redis, scratch);
  } finally {
    await redis.config('SET', 'hash-max-listpack-value', before);
    await redis.del(scratch);
  }
}

/** The completed set's bytes per follow-up it holds. */
async function completedShare(redis: Redis, queuePrefix: string): Promise<number> {
  const key = `${queuePrefix}:completed`;
  const count = await redis.zcard(key);
  return count > 0 ? (await keyBytes(redis, key)) / count : 0;
}

/** Ours, once every follow-up of `ns` has its event: one line for the report. */
export async function oursRetained(redis: Redis, ns: Namespace): Promise<string> {
  const records = await keysStartingWith(redis, keysFor(ns.prefix).dispatch(''));
  const ids = records.map((key) => key.slice(keysFor(ns.prefix).dispatch('').length));
  const queuePrefix = `${ns.prefix}:${QUEUE_NAMES.dispatch}`;
  const record = await meanOf(redis, records);
  const jobs = await meanOf(
    redis,
    ids.map((id) => `${queuePrefix}:${id}`),
  );
  const completed = await completedShare(redis, queuePrefix);
  const events = await redis.xlen(ns.eventsStream);
  const event = events > 0 ? (await keyBytes(redis, ns.eventsStream)) / events : 0;
  const listpack = records[0] ? await asListpack(redis, records[0]) : 0;
  const total = record.bytes + jobs.bytes + completed + event;
  return (
    `ours ${bytes(total)}: the record ${bytes(record.bytes)} (${record.encoding}; ` +
    `${bytes(listpack)} as a listpack, re-encoded with hash-max-listpack-value ` +
    `${LISTPACK_VALUE_BYTES}), the completed BullMQ job ${bytes(jobs.bytes)} (${jobs.encoding}) ` +
    `and its completed-set entry ${bytes(completed)}, the event ${bytes(event)}`
  );
}

/** The baseline, once its `n` jobs (BullMQ ids 1 to `n`) have completed: one line. */
export async function baselineRetained(redis: Redis, ns: Namespace, n: number): Promise<string> {
  const queuePrefix = `${ns.prefix}:${BASELINE_QUEUE}`;
  const jobs = await meanOf(
    redis,
    Array.from({ length: n }, (_, i) => `${queuePrefix}:${i + 1}`),
  );
  const completed = await completedShare(redis, queuePrefix);
  return (
    `baseline ${bytes(jobs.bytes + completed)}: the completed BullMQ job, the prompt in its data, ` +
    `${bytes(jobs.bytes)} (${jobs.encoding}) and its completed-set entry ${bytes(completed)}`
  );
}
