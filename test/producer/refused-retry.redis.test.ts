import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { readEvents, waitForEvents } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';

/**
 * A send refused because REGISTER failed (a key of the wrong type), then retried with the same
 * key once the key is repaired: the retry's follow-up goes on at once, even when a worker already
 * ended the refused send's job (its id's job is kept a while, so the retry's add of the same id
 * does nothing), and its orphan marker does not outlive the retry's record.
 */
describe('a refused send retried with the same key', () => {
  const service = useService('refused-retry');
  const followUp = { projectId: 'p', jobId: 'j', prompt: 'hello', key: 'k-1' };

  /** The refused send, then its job as a worker that took it before its withdrawal leaves it. */
  async function refusedAndEnded(): Promise<string> {
    const ns = service.ns();
    const keys = keysFor(ns.prefix);
    const registrar = service.start({}, { worker: false, poller: false });
    await ns.redis.set(keys.openCounts, 'not a hash');
    await expect(registrar.producer.send(followUp)).rejects.toMatchObject({ code: 'redis_error' });
    await ns.redis.del(keys.openCounts);
    const [dispatchId] = (await ns.redis.keys(keys.orphan('*'))).map((k) => k.split(':').pop());
    expect(dispatchId).toBeDefined();
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    const worker = service.start({ REPAIR_GRACE: '1h' }, { poller: false });
    try {
      await queue.add('followup', { p: 'p', j: 'j' }, { jobId: dispatchId as string });
      await eventually(
        async () =>
          (await queue.getJobState(dispatchId as string)) === 'completed' ? true : undefined,
        { what: 'the refused job completed by the worker' },
      );
      return dispatchId as string;
    } finally {
      await queue.close();
      await worker.close();
    }
  }

  it('is sent at once, not after REPAIR_GRACE', async () => {
    const dispatchId = await refusedAndEnded();
    service.simulator().seedJob('p', 'j');
    const running = service.start({ REPAIR_GRACE: '1h' });
    const sent = await running.producer.send(followUp);
    expect(sent).toEqual({ dispatchId, deduplicated: false });
    await eventually(
      async () => {
        const state = (await running.producer.status(dispatchId))?.state;
        return state === 'sent' || state === 'done' ? true : undefined;
      },
      { what: 'the retried follow-up sent', timeoutMs: 10_000 },
    );
  }, 30_000);

  it('is sent at once when a carry job of its id is still kept', async () => {
    const dispatchId = await refusedAndEnded();
    const ns = service.ns();
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    // The first carry id already has a job (an earlier record of the key), due in an hour.
    await queue.add(
      'followup',
      { p: 'p', j: 'j' },
      { jobId: `${dispatchId}-f1`, delay: 3_600_000 },
    );
    await queue.close();
    service.simulator().seedJob('p', 'j');
    const running = service.start({ REPAIR_GRACE: '1h' });
    await running.producer.send(followUp);
    await eventually(
      async () => {
        const state = (await running.producer.status(dispatchId))?.state;
        return state === 'sent' || state === 'done' ? true : undefined;
      },
      { what: 'the retried follow-up sent', timeoutMs: 10_000 },
    );
  }, 30_000);

  it('its record, once lost, still gets its undeliverable event', async () => {
    const dispatchId = await refusedAndEnded();
    const ns = service.ns();
    const keys = keysFor(ns.prefix);
    const registrar = service.start({}, { worker: false, poller: false });
    await registrar.producer.send(followUp);
    await ns.redis.del(keys.dispatch(dispatchId));
    service.start({ REPAIR_GRACE: '1s' }, { worker: false });
    const [event] = await waitForEvents(ns.redis, ns.eventsStream, 1, 15_000);
    expect(event).toMatchObject({ dispatchId, type: 'followup.undeliverable' });
    expect(event?.event['reason']).toBe('missing_record');
    expect(await readEvents(ns.redis, ns.eventsStream)).toHaveLength(1);
  }, 30_000);
});
