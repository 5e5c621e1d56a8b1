import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrivalTimes, busiestWindow } from '../support/deliveries.js';
import { waitForEvents } from '../support/events.js';
import { createNamespace, type Namespace } from '../support/namespace.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { startService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';

/**
 * REDIS_DURABILITY=fsync on Valkey with appendfsync everysec: the worker waits for WAITAOF between
 * a send's budget grant and its write, inside the budget's margin (100 ms for short windows). A
 * server with clients blocked on WAITAOF fsyncs at once (not at the next second), so that wait
 * must neither give every grant back (nothing would be sent) nor let arrivals crowd the limit.
 */
describe('a send waits for the disk between its grant and its write (Valkey, fsync)', () => {
  const simulator = useSimulator({ workTimeMs: 50, sendLimit: { max: 1_000, windowMs: 2_000 } });
  let server: PrivateRedis;
  let ns: Namespace;
  beforeAll(async () => {
    server = await startPrivateRedis('valkey-server');
  });
  afterAll(async () => {
    await server.destroy();
  });

  it.each([
    ['2/2s', 2_000, 2],
    ['100/1h', 3_600_000, 100],
  ])(
    'SEND_RATE_LIMIT=%s: every follow-up is sent on its first attempt, within the limit',
    async (limit, windowMs, max) => {
      ns = createNamespace('grant-disk', server.url);
      const sim = simulator();
      sim.reset();
      const jobs = ['j0', 'j1', 'j2', 'j3'];
      for (const job of jobs) sim.seedJob('p', job);
      const service = startService(ns, sim, {
        SEND_RATE_LIMIT: limit,
        REDIS_DURABILITY: 'fsync!',
        WORKER_CONCURRENCY: '4',
      });
      try {
        await service.producer.sendMany(
          jobs.map((jobId) => ({ projectId: 'p', jobId, prompt: `to ${jobId}` })),
        );
        const events = await waitForEvents(ns.redis, ns.eventsStream, jobs.length, 20_000);
        expect(events.map((e) => e.type)).toEqual(jobs.map(() => 'followup.completed'));
        expect(events.map((e) => e.event['attempts'])).toEqual(jobs.map(() => 1));
        const times = arrivalTimes(sim.deliveries, 'p');
        expect(times).toHaveLength(jobs.length);
        expect(busiestWindow(times, windowMs)).toBeLessThanOrEqual(max);
      } finally {
        await service.close();
        await ns.cleanup();
      }
    },
    60_000,
  );
});
