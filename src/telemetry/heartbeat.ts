import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.js';
import { within } from '../time/deadline.js';
import type { Logger } from './logger.js';
import { LIFECYCLE } from './names.js';

/**
 * The heartbeat of the role processes, so that a fleet with no worker (or no poller) left is seen:
 * nothing else says so, since a dead worker writes nothing and a queue with no consumer looks like
 * an idle one. Each worker and poller process beats into each shard it serves: a key of its own
 * with a TTL ({@link HEARTBEAT_TTL_MS}), renewed every {@link HEARTBEAT_INTERVAL_MS}, and its name
 * in a set, so counting the live ones reads that set and its few keys, never a SCAN. The TTL runs
 * on Redis's clock, so a host whose clock is off counts the same. A graceful stop removes both at
 * once; a killed process drops out when its key expires.
 */

/**
 * How often a process renews its key.
 * @defaultValue 5000
 */
export const HEARTBEAT_INTERVAL_MS = 5_000;

/**
 * How long a key outlives its last beat: three beats, so one beat late (a long GC pause, a slow
 * Redis) does not make a live process count as dead.
 * @defaultValue 15000
 */
export const HEARTBEAT_TTL_MS = 15_000;

/** The roles that beat. */
export const BEATING_ROLES = ['worker', 'poller'] as const;

/** How long a stop waits for Redis to forget the process; past it, the key expires by itself. */
const STOP_MS = 1_000;

/** A role that beats. */
export type BeatingRole = (typeof BEATING_ROLES)[number];

/** A started heartbeat; `stop` ends it and takes the process out of the count at once. */
export interface Heartbeat {
  stop(): Promise<void>;
}

/** Starts the heartbeat of one role of this process on `redis`, under `keys`. */
export function startHeartbeat(
  redis: Redis,
  keys: Keys,
  role: BeatingRole,
  logger: Logger,
): Heartbeat {
  const member = `${role}:${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const key = keys.aliveProcess(member);
  let failing = false;
  let beating = false;
  const beat = async () => {
    // While Redis is away a beat waits for it: the next ones are not queued behind it.
    if (beating) return;
    beating = true;
    try {
      // Two commands, no MULTI: the key first, so the set never names a process for a count
      // to find without its key; a beat costs the fleet's Redis 2 commands per 5 s per process.
      const replies = await redis
        .pipeline()
        .set(key, '1', 'PX', HEARTBEAT_TTL_MS)
        .sadd(keys.alive, member)
        .exec();
      const failed = replies?.find(([err]) => err)?.[0];
      if (failed) throw failed;
      failing = false;
    } catch (err) {
      // The role's connection reports the outage; one line here says the count will drop.
      if (!failing) logger.warn({ err, role }, LIFECYCLE.heartbeatFailed);
      failing = true;
    } finally {
      beating = false;
    }
  };
  void beat();
  const timer = setInterval(() => void beat(), HEARTBEAT_INTERVAL_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      const forget = redis.pipeline().del(key).srem(keys.alive, member).exec();
      // Redis is gone or slow: the key expires by itself.
      await within(forget, STOP_MS, () => null).catch(() => null);
    },
  };
}

/**
 * How many processes of each role beat under `keys` now, and forgets the ones whose key expired.
 * Costs one SMEMBERS and one MGET of as many keys as processes beat.
 */
export async function countAlive(redis: Redis, keys: Keys): Promise<Record<BeatingRole, number>> {
  const counts: Record<BeatingRole, number> = { worker: 0, poller: 0 };
  const members = await redis.smembers(keys.alive);
  if (members.length === 0) return counts;
  const values = await redis.mget(...members.map((m) => keys.aliveProcess(m)));
  const dead: string[] = [];
  members.forEach((member, i) => {
    const role = member.slice(0, member.indexOf(':')) as BeatingRole;
    if (values[i] === null) dead.push(member);
    else if (role in counts) counts[role]++;
  });
  // A process whose key expired between its beats would be dropped here and added back by its
  // next beat (every beat adds it again): a late process, counted dead for a beat at most.
  if (dead.length > 0) await redis.srem(keys.alive, ...dead);
  return counts;
}
