import { Router } from 'express';
import type { Redis } from 'ioredis';
import { parseSendPause } from '../store/store.js';
import type { DurabilityMode } from '../redis/durability.js';
import { within } from '../time/deadline.js';

/** How long `/readyz` waits for Redis to answer PING. A scrape-style probe must answer quickly. */
export const READY_PING_TIMEOUT_MS = 1_000;

/** One shard's send pause as a `/readyz` check: the check's name and the shard's pause key. */
export interface SendPauseCheck {
  /** `auth` with one shard, `auth:shard 3` with several. */
  readonly check: string;
  /** `Keys.authPause` of the shard. */
  readonly key: string;
}

/** What `/readyz` checks: Redis, and the roles of the process. */
export interface ReadinessSource {
  /** A connection that fails fast (no offline queue), so PING never waits for a reconnect. */
  readonly redis: Redis;
  readonly roles: () => readonly { name: string; running: boolean }[];
  /**
   * The send pause of each shard the process serves, in processes that send or read the agent
   * API: their `/readyz` then has one check per shard (`auth`, or `auth:shard 3`...).
   */
  readonly sendPauses?: readonly SendPauseCheck[] | undefined;
  /**
   * How acknowledged writes are kept (`REDIS_DURABILITY` on this server): shown as the
   * `durability` field, never a failing check (an at-risk server still works).
   */
  readonly durability?: (() => Promise<DurabilityMode | 'unknown'>) | undefined;
}

/**
 * `/healthz` answers while the process runs (liveness: restart me only when this fails);
 * `/readyz` answers 200 only when Redis answers PING within a second and every role runs
 * (readiness: send me traffic), else 503 naming each failed check. In a process that sends, the
 * `auth` check of a shard it serves is `paused ...` while the agent API rejects the key or
 * redirects (each shard pauses and probes on its own): such a process
 * cannot do its work (nothing is lost; it resumes by itself), so it is not ready, though alive.
 * `durability` says how acknowledged writes are kept: `waitaof`, `appendfsync-always`, `none`,
 * `at-risk` (see the start-up warning), or `unknown` while the server cannot be asked.
 */
export function healthRouter(source: ReadinessSource): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.set('cache-control', 'no-store').json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const checks: Record<string, string> = { redis: await pingRedis(source.redis) };
    for (const role of source.roles())
      checks[`role:${role.name}`] = role.running ? 'ok' : 'not running';
    if (checks['redis'] === 'ok') {
      const pauses = source.sendPauses ?? [];
      const answers = await Promise.all(pauses.map(({ key }) => authCheck(source.redis, key)));
      pauses.forEach(({ check }, i) => (checks[check] = answers[i] ?? 'unknown'));
    }
    const ready = Object.values(checks).every((value) => value === 'ok');
    const durability = source.durability
      ? await source.durability().catch(() => 'unknown' as const)
      : undefined;
    res
      .status(ready ? 200 : 503)
      .set('cache-control', 'no-store')
      .json({ status: ready ? 'ready' : 'unready', checks, ...(durability && { durability }) });
  });
  return router;
}

/** `ok`, or why Redis is not ready; never the error's own text, which names the Redis address. */
async function pingRedis(redis: Redis): Promise<string> {
  if (redis.status !== 'ready') return `not connected (${redis.status})`;
  const ping = redis.ping().then(
    (reply) => (reply === 'PONG' ? 'ok' : 'unexpected answer to PING'),
    () => 'PING failed',
  );
  return within(
    ping,
    READY_PING_TIMEOUT_MS,
    () => `no answer to PING within ${READY_PING_TIMEOUT_MS} ms`,
  );
}

/** `ok`, or that every send is paused, with the status that paused it and the next probe. */
async function authCheck(redis: Redis, key: string): Promise<string> {
  try {
    const pause = parseSendPause(await redis.hgetall(key));
    if (!pause) return 'ok';
    const probeInS = Math.max(0, Math.ceil((pause.probeAt - Date.now()) / 1000));
    const what =
      pause.httpStatus >= 300 && pause.httpStatus < 400 ? 'check AGENT_API_URL' : 'replace the key';
    return `paused: the agent API answered ${pause.httpStatus} (${what}); next probe in ${probeInS} s`;
  } catch {
    return 'unknown: no answer from Redis';
  }
}
