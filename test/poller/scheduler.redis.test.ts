import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { eventually } from '../support/namespace.js';
import { usePrivateRedis } from '../support/redis-server.js';
import { startRoles, stopAll } from '../support/roles.js';

/**
 * BullMQ adds a job scheduler's next tick when a worker takes the current one. A Redis crash can
 * take that write back while the current tick's completion survives (ioredis resends it after the
 * restart): no tick is pending any more. Found while digging into the durability crash drill.
 */
describe("the poller's ticks after Redis lost the scheduler's next one", () => {
  // The test restarts the server; the client's commands wait for the reconnect.
  const served = usePrivateRedis('redis-server');

  it('start again once the poller reconnects', async () => {
    const { server, redis } = served();
    const prefix = 'scheduler';
    const connection = redis.duplicate();
    connection.on('error', () => {});
    const queue = new Queue(QUEUE_NAMES.poll, { connection, prefix });
    queue.on('error', () => {});
    const pollers = startRoles('poller', 1, {
      REDIS_URL: server.url,
      DISPATCH_PREFIX: prefix,
      AGENT_API_KEY: 'test-key',
      AGENT_API_URL: 'http://127.0.0.1:9',
      POLL_INTERVAL: '300ms',
      REDIS_DURABILITY: 'none',
      LOG_LEVEL: 'warn',
    });
    const ticks = async () => (await queue.getJobCounts('completed')).completed ?? 0;
    try {
      await eventually(async () => ((await ticks()) >= 3 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'three poll ticks',
      });
      // What the crash leaves: the pending tick gone (BullMQ refuses to remove it, so by hand).
      await eventually(
        async () => {
          for (const job of await queue.getDelayed()) {
            await redis.zrem(queue.toKey('delayed'), job.id ?? '');
            await redis.del(queue.toKey(job.id ?? ''));
          }
          const left = await queue.getJobCounts('delayed', 'wait', 'active', 'prioritized');
          return Object.values(left).every((n) => n === 0) ? true : undefined;
        },
        { timeoutMs: 10_000, what: 'no poll tick pending' },
      );
      // Nothing would ever tick again: the scheduler is still there, with no job.
      expect(await queue.getJobSchedulersCount()).toBe(1);
      const before = await ticks();
      await server.stop('SIGTERM');
      await server.restart();
      await eventually(async () => ((await ticks()) >= before + 3 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'poll ticks again after the reconnect',
      });
    } finally {
      await stopAll(pollers);
      await queue.close();
      connection.disconnect();
    }
  }, 90_000);
});
