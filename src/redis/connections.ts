import { Redis, type RedisOptions } from 'ioredis';

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
 * Opens a connection for `role`. `name` shows in `CLIENT LIST`. Reconnects back off up to 2 s, so a
 * Redis restart is noticed within seconds, not minutes.
 */
export function connect(redisUrl: string, role: ConnectionRole, name: string): Redis {
  return new Redis(redisUrl, {
    ...ROLE_OPTIONS[role],
    connectionName: `agent-dispatch:${name}`,
    retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2_000),
  });
}
