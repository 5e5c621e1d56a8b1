import { afterEach, describe, expect, it } from 'vitest';
import { BacklogFullError, createProducer, type Producer } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { adminOf } from '../support/admin.js';
import { readEvents, waitForEvents } from '../support/events.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { useService } from '../support/service.js';

/**
 * `PROJECT_BACKLOG_MAX`: a send that would take a project's queued follow-ups past it is refused
 * whole with `BacklogFullError`, nothing of it enqueued; under it, and once sends drained the
 * backlog, sends are accepted.
 */
describe('a project backlog limit', () => {
  const ns = useNamespace('backlog');
  const producers: Producer[] = [];
  afterEach(async () => {
    await Promise.all(producers.splice(0).map((p) => p.close()));
  });
  const producer = (projectBacklogMax?: number, sendRateLimit?: string) => {
    const made = createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      ...(projectBacklogMax === undefined ? {} : { projectBacklogMax }),
      ...(sendRateLimit === undefined ? {} : { sendRateLimit }),
    });
    producers.push(made);
    return made;
  };
  /** Keyed ones skip the producer's early read: REGISTER's own check decides. */
  const items = (projectId: string, count: number, from = 0, keyed = false) =>
    Array.from({ length: count }, (_, i) => ({
      projectId,
      jobId: `j${from + i}`,
      prompt: `prompt ${from + i}`,
      ...(keyed ? { key: `${projectId}-${from + i}` } : {}),
    }));
  /** The dispatch records of the namespace: what was registered. */
  const records = async () => (await ns().redis.keys(keysFor(ns().prefix).dispatch('*'))).length;
  const queued = async (projectId: string) =>
    Number(await ns().redis.hget(keysFor(ns().prefix).openCounts, `q:${projectId}`));
  const refusal = (call: Promise<unknown>) =>
    call.then(
      () => {
        throw new Error('the send was accepted');
      },
      (err: unknown) => {
        if (!(err instanceof BacklogFullError)) throw err;
        return err;
      },
    );

  it('refuses a batch that would go over, whole, and accepts one that fits', async () => {
    const sender = producer(3);
    await sender.sendMany(items('p1', 2));
    const err = await refusal(sender.sendMany([...items('p2', 1), ...items('p1', 2, 2)]));
    expect(err).toMatchObject({ code: 'backlog_full', projectId: 'p1', queued: 2, adding: 2 });
    // One over at SEND_RATE_LIMIT's default 100/1h: 36 s until a send makes room.
    expect(err.retryAfterMs).toBe(36_000);
    // Nothing of the batch, not even p2's follow-up, was registered.
    expect(await records()).toBe(2);
    expect(await queued('p1')).toBe(2);
    expect(await queued('p2')).toBe(0);
    // Up to the limit is accepted; a resend of a queued follow-up (its key) adds nothing.
    const keyed = { projectId: 'p1', jobId: 'k', prompt: 'keyed', key: 'k1' };
    const [third] = await sender.sendMany([keyed, ...items('p2', 1)]);
    expect(await sender.send(keyed)).toEqual({ dispatchId: third?.dispatchId, deduplicated: true });
    expect(await queued('p1')).toBe(3);
    await expect(sender.send(items('p1', 1, 9)[0] as never)).rejects.toBeInstanceOf(
      BacklogFullError,
    );
  });

  it('estimates the retry from the rate: the project limit, or sendRateLimit', async () => {
    const err = await refusal(producer(1, '10/1m').sendMany(items('p1', 4)));
    // Three over at 10 a minute: 18 s.
    expect(err.retryAfterMs).toBe(18_000);
    const fast = await refusal(producer(1, '1000/1s').sendMany(items('p1', 2)));
    // Never under a second.
    expect(fast.retryAfterMs).toBe(1_000);
    // A project's own limit is its rate: 6 a minute (its window a little longer, by its margin).
    const admin = adminOf(ns(), '10/1m');
    try {
      await admin.setProjectLimit('p2', '6/1m');
    } finally {
      await admin.close();
    }
    const own = await refusal(producer(1, '10/1m').sendMany(items('p2', 4)));
    expect(own.retryAfterMs).toBeGreaterThanOrEqual(30_000);
    expect(own.retryAfterMs).toBeLessThan(33_000);
  });

  it('refuses in REGISTER too: keyed, whole, its BullMQ jobs marked to end silently', async () => {
    const sender = producer(3);
    await sender.sendMany(items('p1', 2, 0, true));
    const err = await refusal(
      sender.sendMany([...items('p2', 1, 0, true), ...items('p1', 2, 2, true)]),
    );
    expect(err).toMatchObject({ projectId: 'p1', queued: 2, adding: 2, retryAfterMs: 36_000 });
    expect(await records()).toBe(2);
    // Each of the three has its job in the queue and its orphan marker: a worker ends it unseen.
    const at = keysFor(ns().prefix);
    const markers = await ns().redis.keys(at.orphan('*'));
    expect(markers).toHaveLength(3);
    // The two queued again (deduplicated) and one new fit.
    const again = await sender.sendMany([...items('p1', 2, 0, true), ...items('p1', 1, 5, true)]);
    expect(again.map((r) => r.deduplicated)).toEqual([true, true, false]);
  });

  it('lets concurrent producers through up to the limit, no more', async () => {
    const senders = [producer(3), producer(3), producer(3)];
    const sends = Array.from({ length: 12 }, (_, i) =>
      (senders[i % 3] as Producer).send(items('p1', 1, i, i % 2 === 0)[0] as never),
    );
    const outcomes = await Promise.allSettled(sends);
    const refused = outcomes.filter(
      (o) => o.status === 'rejected' && o.reason instanceof BacklogFullError,
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(3);
    expect(refused).toHaveLength(9);
    expect(await queued('p1')).toBe(3);
  });

  it('refuses a batch of several REGISTER calls whole, and takes one that fits', async () => {
    const sender = producer(1_500);
    await refusal(sender.sendMany(items('p1', 1_600, 0, true)));
    expect(await records()).toBe(0);
    expect(await sender.sendMany(items('p1', 1_200, 0, true))).toHaveLength(1_200);
    expect(await queued('p1')).toBe(1_200);
    await refusal(sender.sendMany(items('p1', 1_100, 2_000, true)));
    expect(await records()).toBe(1_200);
  });

  it('is off by default: no limit', async () => {
    expect(await producer().sendMany(items('p1', 50))).toHaveLength(50);
    expect(await queued('p1')).toBe(50);
  });
});

describe('a full backlog once sends drained it', () => {
  const { simulator, ns, start } = useService('backlog-drain', { workTimeMs: () => 50 });

  it('accepts a send again, and a refused follow-up never has an event', async () => {
    for (let i = 0; i < 4; i++) simulator().seedJob('p1', `j${i}`);
    const sender = createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      projectBacklogMax: 2,
    });
    try {
      const first = await sender.sendMany([
        { projectId: 'p1', jobId: 'j0', prompt: 'a' },
        { projectId: 'p1', jobId: 'j1', prompt: 'b' },
      ]);
      // No worker yet: the two are queued, and a third is refused (keyed: by REGISTER, its
      // BullMQ job added and marked).
      await expect(
        sender.send({ projectId: 'p1', jobId: 'j2', prompt: 'c', key: 'c' }),
      ).rejects.toThrow(BacklogFullError);
      start();
      const accepted = await eventually(
        () => sender.send({ projectId: 'p1', jobId: 'j3', prompt: 'd' }).catch(() => undefined),
        { what: 'a send accepted once the backlog drained', intervalMs: 200 },
      );
      const events = await waitForEvents(ns().redis, ns().eventsStream, 3, 30_000);
      const ids = [...first, accepted].map((r) => r.dispatchId);
      expect(new Set(events.map((e) => e.dispatchId))).toEqual(new Set(ids));
      expect(events.every((e) => e.type === 'followup.completed')).toBe(true);
      // The refused sends' BullMQ jobs end without an event, and none of their prompts went out.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await readEvents(ns().redis, ns().eventsStream)).toHaveLength(3);
      expect(simulator().deliveries.map((d) => d.prompt)).toEqual(['a', 'b', 'd']);
    } finally {
      await sender.close();
    }
  });
});
