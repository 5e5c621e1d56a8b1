import { describe, expect, it } from 'vitest';
import { completedStatus, duplicates, readEvents, waitForEvents } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';

describe('a follow-up from send to its event', () => {
  const { simulator, ns, start } = useService('flow', { workTimeMs: 150 });

  it('sends each prompt once, in order per agent job, and publishes one event each', async () => {
    const service = start();
    simulator().seedJob('p1', 'j1');
    simulator().seedJob('p1', 'j2');
    const inputs = [1, 2, 3].flatMap((n) => [
      { projectId: 'p1', jobId: 'j1', prompt: `j1 #${n}`, meta: { n } },
      { projectId: 'p1', jobId: 'j2', prompt: `j2 #${n}` },
    ]);
    const results = await service.producer.sendMany(inputs);
    expect(results.every((r) => !r.deduplicated)).toBe(true);

    const events = await eventually(
      async () => {
        const all = await readEvents(ns().redis, ns().eventsStream);
        return all.length >= inputs.length ? all : undefined;
      },
      { what: 'six events' },
    );

    expect(events).toHaveLength(6);
    expect(duplicates(events.map((e) => e.dispatchId))).toEqual([]);
    expect(new Set(events.map((e) => e.dispatchId))).toEqual(
      new Set(results.map((r) => r.dispatchId)),
    );
    expect(events.every((e) => e.type === 'followup.completed' && e.status === 'completed')).toBe(
      true,
    );
    const deliveries = simulator().deliveries;
    expect(deliveries.filter((d) => d.jobId === 'j1').map((d) => d.prompt)).toEqual([
      'j1 #1',
      'j1 #2',
      'j1 #3',
    ]);
    expect(deliveries.filter((d) => d.jobId === 'j2').map((d) => d.prompt)).toEqual([
      'j2 #1',
      'j2 #2',
      'j2 #3',
    ]);
    const first = events.find((e) => e.dispatchId === results[0]?.dispatchId);
    expect(first?.event).toMatchObject({ meta: { n: 1 }, attempts: 1, reason: null });
  });

  it("keeps only the contract's fields of the agent job in the record and the event", async () => {
    const service = start();
    // What a vendor or a gateway might add to the job: none of it may reach Redis.
    const vendorFields = {
      source: { repository: 'https://github.com/acme/docs', ref: 'main', token: 'vendor-extra-1' },
      debug: { authorization: 'vendor-extra-2' },
    };
    simulator().seedJob('p1', 'j1', vendorFields);
    const [result] = await service.producer.sendMany([
      { projectId: 'p1', jobId: 'j1', prompt: 'one' },
    ]);
    const [event] = await eventually(
      async () => {
        const all = await readEvents(ns().redis, ns().eventsStream);
        return all.length >= 1 ? all : undefined;
      },
      { what: 'the event' },
    );
    const job = event?.event['job'] as Record<string, unknown>;
    expect(Object.keys(job).sort()).toEqual(
      ['archivedAt', 'createdAt', 'id', 'model', 'prLink', 'source', 'status'].sort(),
    );
    expect(job['source']).toEqual({ repository: 'https://github.com/acme/docs', ref: 'main' });
    const record = await ns().redis.hgetall(`${ns().prefix}:d:${result?.dispatchId ?? ''}`);
    expect(Object.keys(record).length).toBeGreaterThan(0);
    expect(JSON.stringify([record, event])).not.toMatch(/vendor-extra/);
  });
});

describe('status after the end', () => {
  const { simulator, ns, start } = useService('ended', { workTimeMs: 100 });

  it('answers for a finished follow-up with its final state, event type, reason and prLink', async () => {
    const service = start();
    simulator().seedJob('p1', 'j1');
    const done = await service.producer.send({ projectId: 'p1', jobId: 'j1', prompt: 'ship it' });
    // No such agent job: the API answers 404 and the follow-up ends undeliverable.
    const lost = await service.producer.send({ projectId: 'p1', jobId: 'gone', prompt: 'hello' });
    const events = await waitForEvents(ns().redis, ns().eventsStream, 2);
    const completed = events.find((e) => e.dispatchId === done.dispatchId);
    expect(completed?.prLink).toMatch(/^https:\/\/github\.com\//);

    const status = await service.producer.status(done.dispatchId);
    expect(status).toMatchObject({
      dispatchId: done.dispatchId,
      projectId: 'p1',
      jobId: 'j1',
      attempts: 1,
      ...completedStatus(completed),
    });
    expect(status?.finishedAt).toEqual(expect.any(String));
    expect(JSON.stringify(status)).not.toContain('ship it');
    expect(await service.producer.status(lost.dispatchId)).toMatchObject({
      state: 'done',
      type: 'followup.undeliverable',
      reason: 'not_found',
      prLink: null,
    });
    expect(await service.producer.status('no-such-dispatch')).toBeNull();
  });
});
