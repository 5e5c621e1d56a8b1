import { describe, expect, it } from 'vitest';
import { waitForEvents, type StreamEvent } from '../support/events.js';
import { createdLane } from '../../src/dispatch/creation.js';
import { createAdmin } from '../../src/producer/index.js';
import { pollerResources, useService } from '../support/service.js';

/** An event's `sentAt` or `finishedAt` as epoch ms. */
const at = (e: StreamEvent, field: 'sentAt' | 'finishedAt') => Date.parse(e.event[field] as string);

/** Creations of agent jobs through the pipeline, and follow-ups chained to them. */
describe('creations', () => {
  const { simulator, ns, start } = useService('creations', { workTimeMs: 300 });

  it('creates a job (POST …/job), tracks its first run, and ends job.completed carrying the new jobId', async () => {
    const service = start();
    const { dispatchId } = await service.producer.create({
      projectId: 'p1',
      prompt: 'build the thing',
      meta: { ticket: 7 },
    });
    const [event] = await waitForEvents(ns().redis, ns().eventsStream, 1, 20_000);
    const created = simulator().deliveries.filter((d) => d.kind === 'create');
    expect(created).toHaveLength(1);
    expect(event).toMatchObject({
      type: 'job.completed',
      dispatchId,
      projectId: 'p1',
      jobId: created[0]!.jobId,
      status: 'completed',
    });
    expect(event!.event['meta']).toEqual({ ticket: 7 });
    expect(event!.prLink).toMatch(/\/pull\//);
    const status = await service.producer.status(dispatchId);
    expect(status).toMatchObject({
      state: 'done',
      type: 'job.completed',
      jobId: created[0]!.jobId,
    });
  }, 30_000);

  it.each(['shared', 'split'])(
    'BUDGET_SCOPE=%s: sends follow-ups chained to a creation to the new job, in order, each after the previous run ended',
    async (scope) => {
      const service = start({
        BUDGET_SCOPE: scope,
        SEND_RATE_LIMIT: '3/2s',
        CREATE_RATE_LIMIT: '1/2s',
      });
      const creation = await service.producer.create({
        projectId: 'p1',
        prompt: 'create',
        key: 'create-1',
      });
      // One by the creation's key, one by its dispatch id.
      const first = await service.producer.send({
        projectId: 'p1',
        after: 'create-1',
        prompt: 'one',
      });
      const second = await service.producer.send({
        projectId: 'p1',
        after: creation.dispatchId,
        prompt: 'two',
      });
      const events = await waitForEvents(ns().redis, ns().eventsStream, 3, 30_000);
      expect(events.map((e) => [e.type, e.dispatchId])).toEqual([
        ['job.completed', creation.dispatchId],
        ['followup.completed', first.dispatchId],
        ['followup.completed', second.dispatchId],
      ]);
      const jobId = events[0]!.jobId;
      expect(events.map((e) => e.jobId)).toEqual([jobId, jobId, jobId]);
      // Each went after the previous one's run ended (its event).
      expect(at(events[1]!, 'sentAt')).toBeGreaterThanOrEqual(at(events[0]!, 'finishedAt') - 50);
      expect(at(events[2]!, 'sentAt')).toBeGreaterThanOrEqual(at(events[1]!, 'finishedAt') - 50);
      const posts = simulator().deliveries.map((d) => [d.kind ?? 'send', d.jobId, d.prompt]);
      expect(posts).toEqual([
        ['create', jobId, 'create'],
        ['send', jobId, 'one'],
        ['send', jobId, 'two'],
      ]);
      console.log(
        events
          .map((e) => `${e.event['finishedAt'] as string} ${e.type} ${e.dispatchId} job ${e.jobId}`)
          .join('\n'),
      );
    },
    40_000,
  );
});

describe('a creation whose answer is lost', () => {
  const { simulator, ns, start } = useService('creation-lost', { workTimeMs: 200 });

  it('ends job.undeliverable (ambiguous), is never resent, and its chained follow-ups end job_not_created', async () => {
    const service = start();
    simulator().setFaults({ timeoutRate: 1 });
    try {
      const creation = await service.producer.create({ projectId: 'p1', prompt: 'lost', key: 'c' });
      const chained = await service.producer.sendMany([
        { projectId: 'p1', after: 'c', prompt: 'one' },
        { projectId: 'p1', after: creation.dispatchId, prompt: 'two' },
      ]);
      const events = await waitForEvents(ns().redis, ns().eventsStream, 3, 30_000);
      expect(events.map((e) => [e.type, e.dispatchId, e.event['reason'], e.jobId])).toEqual([
        ['job.undeliverable', creation.dispatchId, 'ambiguous', ''],
        ['followup.undeliverable', chained[0]!.dispatchId, 'job_not_created', ''],
        ['followup.undeliverable', chained[1]!.dispatchId, 'job_not_created', ''],
      ]);
      // The simulator created the job, but the answer never came: one POST, never a second.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(simulator().requests.filter((r) => r.kind === 'create')).toHaveLength(1);
      expect(simulator().requests.filter((r) => r.kind === 'send')).toHaveLength(0);
      // No job to send them to: no redrive, and no dead letter for a bulk redrive.
      const admin = createAdmin({ redisUrl: ns().redisUrl, prefix: ns().prefix });
      try {
        await expect(admin.redrive(chained[0]!.dispatchId)).rejects.toMatchObject({
          code: 'not_redrivable',
          why: 'job_not_created',
          message: expect.stringContaining(`creation ${creation.dispatchId}`),
        });
        expect(await admin.deadLetters()).toEqual([]);
      } finally {
        await admin.close();
      }
    } finally {
      simulator().setFaults({ timeoutRate: 0 });
    }
  }, 40_000);

  it('refuses an `after` that names no creation of the project, enqueueing nothing', async () => {
    const service = start();
    const made = await service.producer.create({ projectId: 'p1', prompt: 'made', key: 'mine' });
    await expect(
      service.producer.sendMany([
        { projectId: 'p1', jobId: 'j1', prompt: 'fine' },
        { projectId: 'p2', after: 'mine', prompt: 'another project' },
        { projectId: 'p1', after: 'nothing', prompt: 'unknown' },
      ]),
    ).rejects.toMatchObject({
      code: 'invalid_followup',
      problems: [
        { index: 1, field: 'after' },
        { index: 2, field: 'after' },
      ],
    });
    await expect(
      service.producer.send({
        projectId: 'p1',
        jobId: 'j1',
        after: 'mine',
        prompt: 'both',
      } as never),
    ).rejects.toMatchObject({ field: 'jobId' });
    // A plain follow-up cannot join a creation's lane by its name.
    const lane = createdLane(made.dispatchId);
    await expect(
      service.producer.send({ projectId: 'p1', jobId: lane, prompt: 'sneak in' }),
    ).rejects.toMatchObject({
      code: 'invalid_followup',
      field: 'jobId',
      message: expect.stringContaining('created:'),
    });
  }, 20_000);
});

describe('a creation whose worker died mid-send', () => {
  const { simulator, ns, start } = useService('creation-crash', { workTimeMs: 200 });

  it('is not settled from a job it cannot name: it ends job.undeliverable (ambiguous), never sent again', async () => {
    // The producer alone first: the intent is taken by hand, as by a worker that died after it.
    const producerOnly = start({}, { worker: false, poller: false });
    const { dispatchId } = await producerOnly.producer.create({ projectId: 'p1', prompt: 'maybe' });
    const resources = pollerResources(ns(), simulator());
    try {
      const ref = { dispatchId, projectId: 'p1', jobId: createdLane(dispatchId) };
      const verdict = await resources.store.acquire(
        ref,
        { max: 100, windowMs: 60_000 },
        0,
        60_000,
        'gone',
      );
      expect(verdict).toMatchObject({ kind: 'go', to: '' });
    } finally {
      await resources.close();
    }
    // The worker's run of the job finds the intent held, waits out any request in flight, then
    // ends it; the poller meanwhile reads nothing (no job id to read).
    start({ SEND_TIMEOUT: '500ms', CONNECT_TIMEOUT: '200ms' });
    const [event] = await waitForEvents(ns().redis, ns().eventsStream, 1, 40_000);
    expect(event).toMatchObject({ type: 'job.undeliverable', dispatchId, jobId: '' });
    expect(event!.event['reason']).toBe('ambiguous');
    expect(simulator().requests.filter((r) => r.kind === 'create' || r.kind === 'get')).toEqual([]);
  }, 60_000);
});
