import { describe, expect, it } from 'vitest';
import { BacklogFullError, createProducer } from '../../src/producer/index.js';
import type { Delivery } from '../../src/simulator/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { busiestWindow } from '../support/deliveries.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';

/** Arrival times of `deliveries` (the simulator's POSTs) that `keep` keeps, ascending. */
const times = (deliveries: readonly Delivery[], keep: (d: Delivery) => boolean = () => true) =>
  deliveries
    .filter(keep)
    .map((d) => d.at)
    .sort((a, b) => a - b);

const isCreate = (d: Delivery) => d.kind === 'create';

/** Waits until the simulator accepted `count` POSTs (creations and sends). */
const delivered = (all: () => readonly Delivery[], count: number) =>
  eventually(() => (all().length >= count ? [...all()] : undefined), {
    timeoutMs: 60_000,
    what: `${count} deliveries`,
  });

/** Creations count in their project's window (BUDGET_SCOPE), the org's, and the backlog. */
describe('the budget of creations', () => {
  const { simulator, ns, start } = useService('creation-budgets', { workTimeMs: 100 });

  /** Enqueues `creations` creations and `sends` follow-ups (one job each) in project p1. */
  async function enqueue(service: ReturnType<typeof start>, creations: number, sends: number) {
    for (let i = 0; i < sends; i++) simulator().seedJob('p1', `j${i}`);
    await service.producer.sendMany([
      ...Array.from({ length: creations }, (_, i) => ({
        projectId: 'p1',
        prompt: `create ${i}`,
        create: true as const,
      })),
      ...Array.from({ length: sends }, (_, i) => ({
        projectId: 'p1',
        jobId: `j${i}`,
        prompt: `send ${i}`,
      })),
    ]);
  }

  it('shared (the default): creations and sends together never exceed the project window', async () => {
    const service = start({ SEND_RATE_LIMIT: '3/2s' });
    await enqueue(service, 4, 4);
    const all = await delivered(() => simulator().deliveries, 8);
    const busiest = busiestWindow(times(all), 2_000);
    console.log(
      `BUDGET_SCOPE=shared, SEND_RATE_LIMIT=3/2s, 4 creations + 4 sends: busiest 2 s window ${busiest}, ` +
        `all in ${Math.max(...times(all)) - Math.min(...times(all))} ms`,
    );
    expect(all.filter(isCreate)).toHaveLength(4);
    expect(busiest).toBeLessThanOrEqual(3);
  }, 60_000);

  it('split: creations have their own CREATE_RATE_LIMIT, sends keep SEND_RATE_LIMIT', async () => {
    const service = start({
      SEND_RATE_LIMIT: '3/2s',
      BUDGET_SCOPE: 'split',
      CREATE_RATE_LIMIT: '2/2s',
    });
    await enqueue(service, 4, 4);
    const all = await delivered(() => simulator().deliveries, 8);
    const creations = busiestWindow(times(all, isCreate), 2_000);
    const sends = busiestWindow(
      times(all, (d) => !isCreate(d)),
      2_000,
    );
    const together = busiestWindow(times(all), 2_000);
    console.log(
      `BUDGET_SCOPE=split, SEND_RATE_LIMIT=3/2s, CREATE_RATE_LIMIT=2/2s: busiest 2 s window ` +
        `${creations} creations, ${sends} sends, ${together} together`,
    );
    expect(creations).toBeLessThanOrEqual(2);
    expect(sends).toBeLessThanOrEqual(3);
    // Two windows: the first holds both budgets' worth at once.
    expect(together).toBeGreaterThan(3);
  }, 60_000);

  it('ORG_RATE_LIMIT counts creations too', async () => {
    const service = start({ SEND_RATE_LIMIT: '100/2s', ORG_RATE_LIMIT: '2/2s' });
    await enqueue(service, 3, 3);
    const all = await delivered(() => simulator().deliveries, 6);
    expect(busiestWindow(times(all), 2_000)).toBeLessThanOrEqual(2);
  }, 60_000);

  it('PROJECT_BACKLOG_MAX counts creations not yet sent', async () => {
    const producer = createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      projectBacklogMax: 2,
    });
    try {
      await producer.create({ projectId: 'p1', prompt: 'a' });
      await producer.create({ projectId: 'p1', prompt: 'b' });
      const refusal = await producer
        .send({ projectId: 'p1', jobId: 'j', prompt: 'over' })
        .catch((err: unknown) => err);
      expect(refusal).toBeInstanceOf(BacklogFullError);
      await expect(producer.create({ projectId: 'p1', prompt: 'c' })).rejects.toBeInstanceOf(
        BacklogFullError,
      );
      await expect(producer.create({ projectId: 'p2', prompt: 'other' })).resolves.toBeDefined();
    } finally {
      await producer.close();
    }
  }, 30_000);

  it('BUDGET_SCOPE=split: cancelling a creation gives its reserved slot back in the creation log', async () => {
    const service = start({ BUDGET_SCOPE: 'split', CREATE_RATE_LIMIT: '1/20s' });
    const log = keysFor(ns().prefix).createBudget('p1');
    await service.producer.create({ projectId: 'p1', prompt: 'one' });
    const second = await service.producer.create({ projectId: 'p1', prompt: 'two' });
    const reserved = `r:${second.dispatchId}`;
    await eventually(
      async () => (await ns().redis.zrange(log, 0, -1)).includes(reserved) || undefined,
      {
        timeoutMs: 10_000,
        what: 'the reservation',
      },
    );
    // The producer's store is built without the fleet's BUDGET_SCOPE.
    await expect(service.producer.cancel(second.dispatchId)).resolves.toEqual({
      dispatchId: second.dispatchId,
      state: 'done',
      type: 'job.cancelled',
    });
    expect(await ns().redis.zrange(log, 0, -1)).not.toContain(reserved);
  }, 30_000);
});
