import { describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { waitForEvents } from '../support/events.js';
import { useService } from '../support/service.js';

/** Creations refused for a key conflict, and the follow-ups chained to them. */
describe('a creation refused for a key conflict', () => {
  const { simulator, ns, start } = useService('creation-conflict', { workTimeMs: 200 });

  it('refuses the follow-ups chained to it in the same batch, not chaining them to the key holder', async () => {
    const service = start();
    const old = await service.producer.create({ projectId: 'p1', prompt: 'old', key: 'kc' });
    const err = await service.producer
      .sendMany([
        { projectId: 'p1', prompt: 'new', key: 'kc', create: true },
        { projectId: 'p1', after: 'kc', prompt: 'chained to the new one' },
        { projectId: 'p1', jobId: 'j1', prompt: 'plain' },
      ])
      .catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'idempotency_conflict',
      conflicts: [
        { index: 0, key: 'kc', dispatchId: old.dispatchId },
        { index: 1, after: old.dispatchId },
      ],
      results: [null, null, { deduplicated: false }],
    });
    expect((err as Error).message).toMatch(/\[1\] after: its creation .* was refused/);
    const events = await waitForEvents(ns().redis, ns().eventsStream, 2, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // The plain one was enqueued (its job j1 is unknown to the API); the chained one never was.
    expect(events.map((e) => [e.type, e.event['reason'] ?? null]).sort()).toEqual([
      ['followup.undeliverable', 'not_found'],
      ['job.completed', null],
    ]);
    const posts = simulator().deliveries.map((d) => [d.kind ?? 'send', d.prompt]);
    expect(posts).toEqual([['create', 'old']]);
  }, 40_000);
});

describe('a batch retried after its creation changed', () => {
  const { ns, start } = useService('creation-conflict-retry', { workTimeMs: 200 });

  it('answers a chained follow-up already registered as it is, leaving no orphan marker', async () => {
    const service = start({}, { worker: false, poller: false });
    const chained = { projectId: 'p1', after: 'kc', prompt: 'chained', key: 'f1' };
    const [, first] = await service.producer.sendMany([
      { projectId: 'p1', prompt: 'v1', key: 'kc', create: true },
      chained,
    ]);
    const err = await service.producer
      .sendMany([{ projectId: 'p1', prompt: 'v2', key: 'kc', create: true }, chained])
      .catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'idempotency_conflict',
      conflicts: [{ index: 0, key: 'kc' }],
      results: [null, { dispatchId: first!.dispatchId, deduplicated: true }],
    });
    expect(await ns().redis.exists(keysFor(ns().prefix).orphan(first!.dispatchId))).toBe(0);
    start();
    const events = await waitForEvents(ns().redis, ns().eventsStream, 2, 30_000);
    expect(events.map((e) => [e.type, e.dispatchId]).sort()).toContainEqual([
      'followup.completed',
      first!.dispatchId,
    ]);
  }, 40_000);

  it('withdraws the job of a chained follow-up refused with its creation, naming `after`', async () => {
    const service = start({}, { worker: false, poller: false });
    await service.producer.create({ projectId: 'p1', prompt: 'v1', key: 'kc' });
    const err = await service.producer
      .sendMany([
        { projectId: 'p1', prompt: 'v2', key: 'kc', create: true },
        { projectId: 'p1', after: 'kc', prompt: 'chained' },
      ])
      .catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/\[1\] after: its creation/);
    const refused = (err as { conflicts: { dispatchId: string }[] }).conflicts[1]!.dispatchId;
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns().redis.duplicate(),
      prefix: ns().prefix,
    });
    try {
      expect(await queue.getJob(refused)).toBeUndefined();
    } finally {
      await queue.close();
    }
  }, 30_000);
});
