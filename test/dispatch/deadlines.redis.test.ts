import { describe, expect, it } from 'vitest';
import { eventTypeNamed } from '../../src/dispatch/event-body.js';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { InvalidFollowUpError } from '../../src/dispatch/followup-problems.js';
import { keysFor } from '../../src/redis/keys.js';
import { adminOf } from '../support/admin.js';
import { readEvents, waitForEvents, type StreamEvent } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';

/**
 * Deadlines (`ttl`, `expiresAt`): a follow-up whose turn comes after its deadline ends
 * `followup.expired`, unsent, no budget spent; the rest of its lane goes on.
 */
describe('a follow-up with a deadline', () => {
  // j-long's run takes 3 s: what waits behind it in its lane outlives a 1 s ttl.
  const { simulator, ns, start } = useService('deadlines', {
    workTimeMs: (_project, jobId) => (jobId === 'j-long' ? 3_000 : 100),
  });
  const posts = () => simulator().requests.filter((r) => r.kind === 'send');
  const budget = () => ns().redis.zrange(keysFor(ns().prefix).budget('p1'), 0, -1);
  const byId = (events: readonly StreamEvent[], id: string | undefined) =>
    events.find((e) => e.dispatchId === id);

  it('ends expired behind a long run, unsent, and the next of its lane is sent', async () => {
    const service = start();
    simulator().seedJob('p1', 'j-long');
    const [first, late, next] = await service.producer.sendMany([
      { projectId: 'p1', jobId: 'j-long', prompt: 'first' },
      { projectId: 'p1', jobId: 'j-long', prompt: 'late', ttl: '1s' },
      { projectId: 'p1', jobId: 'j-long', prompt: 'next' },
    ]);
    const events = await waitForEvents(ns().redis, ns().eventsStream, 3, 30_000);
    expect(events.map((e) => e.dispatchId)).toEqual([
      first?.dispatchId,
      late?.dispatchId,
      next?.dispatchId,
    ]);
    const expired = byId(events, late?.dispatchId);
    expect(expired).toMatchObject({ type: 'followup.expired', status: '' });
    expect(expired?.event).toMatchObject({ sentAt: null, attempts: 0, reason: null });
    expect(typeof expired?.event['expiresAt']).toBe('string');
    expect(Date.parse(String(expired?.event['expiresAt']))).toBeLessThanOrEqual(
      Date.parse(String(expired?.event['finishedAt'])),
    );
    expect(byId(events, next?.dispatchId)?.type).toBe('followup.completed');
    // Two POSTs, the expired prompt in neither; two budget entries, none of the expired one.
    expect(posts().map((r) => r.jobId)).toEqual(['j-long', 'j-long']);
    expect(simulator().deliveries.map((d) => d.prompt)).toEqual(['first', 'next']);
    expect(await budget()).toHaveLength(2);
    expect((await budget()).some((entry) => entry.includes(late?.dispatchId ?? '?'))).toBe(false);
    expect(await service.producer.status(late?.dispatchId ?? '')).toMatchObject({
      state: 'done',
      type: 'followup.expired',
      expiresAt: expired?.event['expiresAt'],
    });
  });

  it('spends no budget: one waiting for a slot past its deadline ends expired', async () => {
    const service = start({ SEND_RATE_LIMIT: '1/1h' });
    simulator().seedJob('p1', 'j1');
    simulator().seedJob('p1', 'j2');
    const sent = await service.producer.send({ projectId: 'p1', jobId: 'j1', prompt: 'spends' });
    await eventually(async () => ((await budget()).length === 1 ? true : undefined), {
      what: 'the first send in the budget',
    });
    const before = await budget();
    const waiting = await service.producer.send({
      projectId: 'p1',
      jobId: 'j2',
      prompt: 'waits',
      ttl: '1500ms',
    });
    const events = await waitForEvents(ns().redis, ns().eventsStream, 2, 30_000);
    expect(byId(events, waiting.dispatchId)?.type).toBe('followup.expired');
    expect(byId(events, sent.dispatchId)?.type).toBe('followup.completed');
    // The window's one send, and no entry (a reservation) of the expired one.
    expect(await budget()).toEqual(before);
    expect(posts()).toHaveLength(1);
  });

  it("parked by its project's pause past its deadline, it ends expired when resumed", async () => {
    const service = start();
    simulator().seedJob('p1', 'j1');
    const admin = adminOf(ns());
    try {
      await admin.pauseProject('p1');
      const expiresAt = new Date(Date.now() + 1_000).toISOString();
      const paused = await service.producer.send({
        projectId: 'p1',
        jobId: 'j1',
        prompt: 'paused',
        expiresAt,
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await readEvents(ns().redis, ns().eventsStream)).toEqual([]);
      await admin.resumeProject('p1');
      const [event] = await waitForEvents(ns().redis, ns().eventsStream, 1, 30_000);
      expect(event).toMatchObject({ dispatchId: paused.dispatchId, type: 'followup.expired' });
      expect(event?.event['expiresAt']).toBe(expiresAt);
      expect(posts()).toHaveLength(0);
      expect(await budget()).toEqual([]);
    } finally {
      await admin.close();
    }
  });

  it('past its deadline, one the API may have received already ends undeliverable (ambiguous), not expired', async () => {
    const service = start();
    simulator().seedJob('p1', 'j1');
    const admin = adminOf(ns());
    try {
      await admin.pauseProject('p1');
      const sent = await service.producer.send({
        projectId: 'p1',
        jobId: 'j1',
        prompt: 'maybe there',
        ttl: '1s',
      });
      // What an approved resend (AMBIGUOUS_RESEND) of an unsettled send leaves: queued again, its
      // first request possibly received.
      await ns().redis.hset(keysFor(ns().prefix).dispatch(sent.dispatchId), {
        resend: '1',
        attempts: '1',
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await admin.resumeProject('p1');
      const [event] = await waitForEvents(ns().redis, ns().eventsStream, 1, 30_000);
      expect(event).toMatchObject({ dispatchId: sent.dispatchId, type: 'followup.undeliverable' });
      expect(event?.event).toMatchObject({ reason: 'ambiguous', attempts: 1 });
      expect(posts()).toHaveLength(0);
    } finally {
      await admin.close();
    }
  });

  it('finding its project parked after a 429, it wakes at its deadline and ends expired', async () => {
    const service = start();
    simulator().seedJob('p1', 'j1');
    // A park of a minute, as a 429 leaves it: the follow-up must not wait for its end.
    await ns().redis.set(keysFor(ns().prefix).park('p1'), String(Date.now() + 60_000));
    const startedAt = Date.now();
    const parked = await service.producer.send({
      projectId: 'p1',
      jobId: 'j1',
      prompt: 'parked',
      ttl: '1s',
    });
    const [event] = await waitForEvents(ns().redis, ns().eventsStream, 1, 30_000);
    expect(event).toMatchObject({ dispatchId: parked.dispatchId, type: 'followup.expired' });
    expect(Date.now() - startedAt).toBeLessThan(30_000);
    expect(posts()).toHaveLength(0);
    expect(await budget()).toEqual([]);
  });

  it('is sent as usual before its deadline, and its event and status carry the deadline', async () => {
    const service = start();
    simulator().seedJob('p1', 'j1');
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const [withTtl, withDate] = await service.producer.sendMany([
      { projectId: 'p1', jobId: 'j1', prompt: 'one', ttl: '1h' },
      { projectId: 'p1', jobId: 'j1', prompt: 'two', expiresAt },
    ]);
    const events = await waitForEvents(ns().redis, ns().eventsStream, 2, 30_000);
    expect(events.map((e) => e.type)).toEqual(['followup.completed', 'followup.completed']);
    expect(simulator().deliveries.map((d) => d.prompt)).toEqual(['one', 'two']);
    // The ttl counts from Redis's time at the enqueue: within a minute of an hour from now.
    const ttlDeadline = Date.parse(String(byId(events, withTtl?.dispatchId)?.event['expiresAt']));
    expect(Math.abs(ttlDeadline - (Date.now() + 3_600_000))).toBeLessThan(60_000);
    expect(byId(events, withDate?.dispatchId)?.event['expiresAt']).toBe(expiresAt);
    expect((await service.producer.status(withDate?.dispatchId ?? ''))?.expiresAt).toBe(expiresAt);
    // Without a deadline: null, in the event and in status.
    const plain = await service.producer.send({ projectId: 'p1', jobId: 'j1', prompt: 'three' });
    const last = await waitForEvents(ns().redis, ns().eventsStream, 3, 30_000);
    expect(byId(last, plain.dispatchId)?.event['expiresAt']).toBeNull();
    expect((await service.producer.status(plain.dispatchId))?.expiresAt).toBeNull();
  });

  it('is an event type every filter names (events --type, GET /v1/events, webhooks)', () => {
    expect(Object.values(EVENT_TYPES)).toContain('followup.expired');
    expect(eventTypeNamed('expired')).toBe('followup.expired');
    expect(eventTypeNamed('followup.expired')).toBe('followup.expired');
  });

  it('refuses a bad deadline naming the field, and enqueues nothing', async () => {
    const service = start({}, { worker: false, poller: false });
    const base = { projectId: 'p1', jobId: 'j1', prompt: 'x' };
    const refused = async (extra: Record<string, unknown>) => {
      const err: unknown = await service.producer
        .send({ ...base, ...extra } as never)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidFollowUpError);
      return (err as InvalidFollowUpError).problems.map((p) => `${p.field}: ${p.message}`);
    };
    expect(await refused({ ttl: '0s' })).toEqual(['ttl: must be more than 0']);
    expect(await refused({ ttl: '-5m' })).toEqual([
      'ttl: must be a duration such as 250ms, 5s, 30m, 2h or 7d',
    ]);
    expect(await refused({ ttl: 60_000 })).toEqual([
      'ttl: must be a duration such as 250ms, 5s, 30m, 2h or 7d',
    ]);
    expect(await refused({ expiresAt: '2020-01-01T00:00:00Z' })).toEqual([
      'expiresAt: must be in the future',
    ]);
    expect(await refused({ expiresAt: 'tomorrow' })).toEqual([
      'expiresAt: must be an ISO 8601 date-time with a time zone, such as 2026-12-01T09:00:00Z',
    ]);
    expect(
      await refused({ ttl: '5m', expiresAt: new Date(Date.now() + 60_000).toISOString() }),
    ).toEqual(['expiresAt: give either ttl or expiresAt, not both']);
    // A batch with one bad deadline is refused whole.
    const batch = await service.producer
      .sendMany([base, { ...base, ttl: 'soon' }])
      .catch((e: unknown) => e);
    expect((batch as InvalidFollowUpError).problems).toEqual([
      { index: 1, field: 'ttl', message: 'must be a duration such as 250ms, 5s, 30m, 2h or 7d' },
    ]);
    // null means absent.
    await expect(service.producer.send({ ...base, ttl: null, expiresAt: null })).resolves.toEqual(
      expect.objectContaining({ deduplicated: false }),
    );
    expect(await ns().redis.keys(`${ns().prefix}:d:*`)).toHaveLength(1);
  });
});
