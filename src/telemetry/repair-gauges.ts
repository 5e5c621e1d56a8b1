import type { Redis } from 'ioredis';
import { Gauge, type Registry } from 'prom-client';
import type { Keys } from '../redis/keys.js';
import type { Logger } from './logger.js';
import { METRIC_NAMES } from './names.js';
import { eachShard, scrapeFailure, type Current } from './redis-gauges.js';

/**
 * The last complete pass of the poller's repair sweep, read at scrape time from the shard's
 * `repair:last` (written by whichever poller ended the pass): how long it took
 * (`agent_dispatch_repair_pass_seconds{shard}`) and when it ended
 * (`agent_dispatch_repair_pass_ended_timestamp_seconds{shard}`). No series for a shard whose
 * sweep has not ended a pass yet. Read from Redis, the figures are the same on every process that
 * exports them, and never left behind by a poller that ended a pass long ago.
 */
export function registerRepairGauges(
  registry: Registry,
  current: Current,
  fallbackLogger: Logger | undefined,
): void {
  const failed = scrapeFailure(fallbackLogger);
  const gauge = (name: string, help: string, value: (pass: LastPass) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['shard'],
      registers: [registry],
      async collect() {
        this.reset();
        await eachShard(current, failed, lastPass, undefined, (shard, pass) => {
          if (pass) this.set({ shard }, value(pass));
        });
      },
    });
  gauge(
    METRIC_NAMES.repairPassSeconds,
    'Seconds the last complete pass of the repair sweep took (first page to last), per shard, read at scrape time.',
    (pass) => pass.seconds,
  );
  gauge(
    METRIC_NAMES.repairPassEnded,
    'When the last complete pass of the repair sweep ended (Unix time), per shard, read at scrape time.',
    (pass) => pass.endedAtMs / 1000,
  );
}

interface LastPass {
  readonly seconds: number;
  readonly endedAtMs: number;
}

/** The shard's last complete pass; `undefined`: none yet. */
async function lastPass(redis: Redis, keys: Keys): Promise<LastPass | undefined> {
  const [seconds, endedAt] = await redis.hmget(keys.repairLast, 'seconds', 'endedAt');
  if (seconds === null || endedAt === null) return undefined;
  return { seconds: Number(seconds), endedAtMs: Number(endedAt) };
}
