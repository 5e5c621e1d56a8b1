import { describe, expect, it } from 'vitest';
import { createAdmin } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { waitForEvents } from '../support/events.js';
import { useService } from '../support/service.js';

/**
 * Follow-ups chained to a creation outlive its record (DISPATCH_RETENTION, at least a minute:
 * its expiry is stood in for by deleting the record by hand).
 */
describe('follow-ups chained to a creation whose record expired', () => {
  const { simulator, ns, start } = useService('creation-retention', { workTimeMs: 300 });

  it('go to the job it created, queued before or after it ended', async () => {
    const service = start();
    const admin = createAdmin({ redisUrl: ns().redisUrl, prefix: ns().prefix });
    try {
      const c = await service.producer.create({ projectId: 'p1', prompt: 'c', key: 'c' });
      const before = await service.producer.send({ projectId: 'p1', after: 'c', prompt: 'one' });
      // Paused once the creation is sent: it ends, its chained follow-ups wait.
      await expect.poll(async () => simulator().deliveries.length, { timeout: 15_000 }).toBe(1);
      await admin.pauseProject('p1');
      const [made] = await waitForEvents(ns().redis, ns().eventsStream, 1, 20_000);
      const after = await service.producer.send({ projectId: 'p1', after: 'c', prompt: 'two' });
      await ns().redis.del(keysFor(ns().prefix).dispatch(c.dispatchId));
      await admin.resumeProject('p1');
      const events = await waitForEvents(ns().redis, ns().eventsStream, 3, 30_000);
      expect(events.slice(1).map((e) => [e.type, e.dispatchId, e.jobId])).toEqual([
        ['followup.completed', before.dispatchId, made!.jobId],
        ['followup.completed', after.dispatchId, made!.jobId],
      ]);
    } finally {
      await admin.close();
    }
  }, 60_000);

  it('learn the job one by one: an end writes it onto the next in the lane only', async () => {
    // All three queued before the creation is sent: none learns its job from REGISTER.
    const producerOnly = start({}, { worker: false, poller: false });
    const admin = createAdmin({ redisUrl: ns().redisUrl, prefix: ns().prefix });
    const target = (id: string) => ns().redis.hget(keysFor(ns().prefix).dispatch(id), 'target');
    try {
      await producerOnly.producer.create({ projectId: 'p1', prompt: 'c', key: 'c' });
      const chained = [];
      for (const prompt of ['one', 'two', 'three']) {
        chained.push(await producerOnly.producer.send({ projectId: 'p1', after: 'c', prompt }));
      }
      start();
      await expect.poll(async () => simulator().deliveries.length, { timeout: 15_000 }).toBe(1);
      await admin.pauseProject('p1');
      const [made] = await waitForEvents(ns().redis, ns().eventsStream, 1, 20_000);
      const ids = chained.map((f) => f.dispatchId);
      expect(await Promise.all(ids.map(target))).toEqual([made!.jobId, null, null]);
      await admin.resumeProject('p1');
      const events = await waitForEvents(ns().redis, ns().eventsStream, 4, 40_000);
      expect(events.slice(1).map((e) => [e.dispatchId, e.jobId])).toEqual(
        ids.map((id) => [id, made!.jobId]),
      );
    } finally {
      await admin.close();
    }
  }, 60_000);

  it('end creation_expired, not job_not_created, when the record went before they learned a job', async () => {
    const service = start({}, { worker: false, poller: false });
    const c = await service.producer.create({ projectId: 'p1', prompt: 'c', key: 'c' });
    const f = await service.producer.send({ projectId: 'p1', after: 'c', prompt: 'one' });
    // The creation's record gone with the creation: its follow-up has no job to learn.
    await ns().redis.del(keysFor(ns().prefix).dispatch(c.dispatchId));
    start();
    const events = await waitForEvents(ns().redis, ns().eventsStream, 1, 30_000);
    const ended = events.find((e) => e.dispatchId === f.dispatchId);
    expect(ended).toMatchObject({ type: 'followup.undeliverable', jobId: '' });
    expect(ended!.event['reason']).toBe('creation_expired');
    expect(simulator().requests.filter((r) => r.kind === 'send')).toHaveLength(0);
  }, 60_000);

  it('a creation whose record is gone ends job.undeliverable, no lane name as its jobId', async () => {
    const producerOnly = start({}, { worker: false, poller: false });
    const c = await producerOnly.producer.create({ projectId: 'p1', prompt: 'c' });
    await ns().redis.del(keysFor(ns().prefix).dispatch(c.dispatchId));
    start();
    const [event] = await waitForEvents(ns().redis, ns().eventsStream, 1, 30_000);
    expect(event).toMatchObject({ type: 'job.undeliverable', dispatchId: c.dispatchId, jobId: '' });
    expect(event!.event['reason']).toBe('missing_record');
    expect(simulator().requests.filter((r) => r.kind === 'create')).toHaveLength(0);
  }, 60_000);
});
