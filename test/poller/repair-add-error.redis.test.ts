import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { createNamespace, eventually } from '../support/namespace.js';
import { startService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';

/**
 * A carry job's id already taken (here by a key of the wrong type, written by hand; or a job kept
 * of an earlier record of the same key): the repair sweep numbers the replacement past it, and
 * gives the page's other lost jobs back. Adding to a taken id would do nothing, or fail the page's
 * addBulk (BullMQ's addBulk stops at its first failed add).
 */
describe('the repair sweep, when a carry id is taken', () => {
  const simulator = useSimulator();
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('replaces an ended job under the next free id, and gives the other lost jobs back', async () => {
    const ns = createNamespace('repair-add-error');
    cleanups.push(() => ns.cleanup());
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    cleanups.push(() => queue.close());
    const service = startService(ns, simulator(), { REPAIR_GRACE: '1s' }, { worker: false });
    cleanups.push(() => service.close());
    // Ended by something other than our worker; its replacement's job key is a string.
    const ended = await service.producer.send({ projectId: 'p', jobId: 'a', prompt: 'a' });
    await ns.redis.set(queue.toKey(`${ended.dispatchId}-f1`), 'not a job hash');
    const intruder = new Worker(QUEUE_NAMES.dispatch, () => Promise.resolve('not ours'), {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    await eventually(
      async () => (await queue.getJobState(ended.dispatchId)) === 'completed' || undefined,
    );
    await intruder.close();
    // Missing: its job removed.
    const missing = await service.producer.send({ projectId: 'p', jobId: 'b', prompt: 'b' });
    await queue.remove(missing.dispatchId);
    await eventually(async () => (await queue.getJob(missing.dispatchId)) ?? undefined, {
      what: 'the missing job given back',
    });
    await eventually(
      async () => {
        const repairs = await service.metrics.registry.getSingleMetricAsString(
          'agent_dispatch_repairs_total',
        );
        return repairs.includes('outcome="readded"} 1') || undefined;
      },
      { what: 'the re-added job counted' },
    );
    expect(await ns.redis.type(queue.toKey(`${ended.dispatchId}-f1`))).toBe('string');
    await eventually(async () => (await queue.getJob(`${ended.dispatchId}-f2`)) ?? undefined, {
      what: 'the ended job replaced past the taken id',
    });
  }, 30_000);
});
