import { Queue, Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { startService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';

/**
 * A tick Worker can wedge for good inside BullMQ: after a cluster master's restart, its blocking
 * connection's reset may await an ioredis `Cluster.connect()` that never settles, and its fetch
 * loop waits on it for ever (CHANGELOG, known issues). That hang cannot be caused on demand, so
 * this test causes the same state: the Worker's blocking wait (`waitForJob`, BullMQ 6.7) never
 * returns, for the Workers running when the wedge starts. Everything else is real.
 */
type WaitForJob = (this: Worker, ...args: unknown[]) => Promise<number>;
const prototype = Worker.prototype as unknown as { waitForJob: WaitForJob };

describe("the poller's watchdog", () => {
  const simulator = useSimulator({ workTimeMs: 100 });
  const ns = useNamespace('watchdog');

  it('makes a wedged tick Worker again, and the ticks go on', async () => {
    const wedged = new Set<Worker>();
    const running = new Set<Worker>();
    const waitForJob = prototype.waitForJob;
    prototype.waitForJob = function (this: Worker, ...args: unknown[]) {
      running.add(this);
      return wedged.has(this) ? new Promise<number>(() => {}) : waitForJob.apply(this, args);
    };
    const queue = new Queue(QUEUE_NAMES.poll, { connection: ns().redis, prefix: ns().prefix });
    const ticks = async () => (await queue.getJobCounts('completed')).completed ?? 0;
    let service: ReturnType<typeof startService> | undefined;
    try {
      service = startService(
        ns(),
        simulator(),
        { POLL_INTERVAL: '200ms' },
        { worker: false, watchdog: { everyMs: 500, afterMs: 2_000 } },
      );
      await eventually(async () => ((await ticks()) >= 3 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'three poll ticks',
      });
      const wedgedAt = Date.now();
      for (const worker of running) wedged.add(worker);
      // The wait under way ends at its block timeout; the next one never does.
      await eventually(
        async () => {
          const before = await ticks();
          await new Promise((r) => setTimeout(r, 1_000));
          return (await ticks()) === before ? before : undefined;
        },
        { timeoutMs: 10_000, what: 'the ticks to stop' },
      );
      const stopped = await ticks();
      await eventually(async () => ((await ticks()) >= stopped + 3 ? true : undefined), {
        timeoutMs: 15_000,
        what: 'poll ticks again, run by a new Worker',
      });
      console.log(`[watchdog] ticks went on ${Date.now() - wedgedAt} ms after the wedge`);
      expect([...running].filter((w) => !wedged.has(w) && w.name === QUEUE_NAMES.poll)).not.toEqual(
        [],
      );
    } finally {
      prototype.waitForJob = waitForJob;
      await queue.close();
      await service?.close();
    }
  }, 60_000);
});
