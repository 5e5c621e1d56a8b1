import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { budgetRate } from '../../src/dispatch/budget.js';
import type { DispatchRef } from '../../src/store/store.js';
import {
  InvalidControlError,
  NotCancellableError,
  UnknownDispatchError,
  type Admin,
} from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { adminOf } from '../support/admin.js';
import { readEvents } from '../support/events.js';
import { useStore } from '../support/store.js';

/** SEND_RATE_LIMIT of these tests, as ACQUIRE counts it. */
const DEFAULT = budgetRate({ max: 100, windowMs: 60_000 });

describe('operator controls in the store (cancel, pause, limit, show)', () => {
  const fixture = useStore('controls');

  async function withAdmin<T>(use: (admin: Admin) => Promise<T>): Promise<T> {
    const admin = adminOf(fixture().ns, '100/1m');
    try {
      return await use(admin);
    } finally {
      await admin.close();
    }
  }

  async function enqueue(count: number, projectId = 'p', jobId = 'j'): Promise<DispatchRef[]> {
    const inputs = Array.from({ length: count }, (_, i) => ({ projectId, jobId, prompt: `#${i}` }));
    const results = await fixture().producer.sendMany(inputs);
    return results.map((r) => ({ dispatchId: r.dispatchId, projectId, jobId }));
  }

  const acquire = (ref: DispatchRef, token = randomUUID()) =>
    fixture().store.acquire(ref, DEFAULT, DEFAULT.toleranceMs, 60_000, token);

  it('cancels a queued follow-up with one followup.cancelled event and hands its lane on', async () => {
    const [first, second] = (await enqueue(2)) as [DispatchRef, DispatchRef];
    expect((await acquire(second)).kind).toBe('blocked');
    const result = await withAdmin((admin) => admin.cancel(first.dispatchId));
    expect(result).toEqual({
      dispatchId: first.dispatchId,
      state: 'done',
      type: 'followup.cancelled',
    });
    const events = await readEvents(fixture().ns.redis, fixture().ns.eventsStream);
    expect(events.map((e) => [e.type, e.dispatchId, e.status])).toEqual([
      ['followup.cancelled', first.dispatchId, ''],
    ]);
    expect(await fixture().producer.status(first.dispatchId)).toMatchObject({
      state: 'done',
      type: 'followup.cancelled',
    });
    // Its BullMQ job is gone, and ACQUIRE of a cancelled record sends nothing.
    expect(
      await fixture().ns.redis.exists(`${fixture().ns.prefix}:dispatch:${first.dispatchId}`),
    ).toBe(0);
    expect(await acquire(first)).toEqual({ kind: 'not-queued', state: 'done' });
    expect((await acquire(second)).kind).toBe('go');
    // Cancelling again, or the one being sent, is refused with its state and changes nothing.
    for (const [ref, state] of [
      [first, 'done'],
      [second, 'sending'],
    ] as const) {
      const err = await withAdmin((admin) => admin.cancel(ref.dispatchId)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NotCancellableError);
      expect(err).toMatchObject({ code: 'not_cancellable', state });
    }
    expect(await readEvents(fixture().ns.redis, fixture().ns.eventsStream)).toHaveLength(1);
    const unknown = await withAdmin((admin) => admin.cancel('nope')).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(UnknownDispatchError);
  });

  it('refuses to cancel a follow-up queued again to resend an unsettled send: it may be with the agent', async () => {
    const [ref] = (await enqueue(1, 'r')) as [DispatchRef];
    // What requeue-5.lua leaves after an approved resend of an unsettled send.
    await fixture().ns.redis.hset(
      keysFor(fixture().ns.prefix).dispatch(ref.dispatchId),
      'resend',
      '1',
    );
    const err = await withAdmin((admin) => admin.cancel(ref.dispatchId)).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'not_cancellable', state: 'unsettled' });
    expect((await fixture().store.sends.get(ref.dispatchId))?.state).toBe('queued');
    expect(await readEvents(fixture().ns.redis, fixture().ns.eventsStream)).toEqual([]);
  });

  it('gives a cancelled follow-up the budget slot it had reserved', async () => {
    const budget = keysFor(fixture().ns.prefix).budget('p');
    const refs = await enqueue(3, 'p', 'x');
    const one = { max: 1, windowMs: 60_000 };
    const lanes = await Promise.all(
      ['a', 'b'].map(async (jobId) => (await enqueue(1, 'p', jobId))[0] as DispatchRef),
    );
    expect((await fixture().store.acquire(refs[0] as DispatchRef, one, 50, 60_000, 't')).kind).toBe(
      'go',
    );
    const waiting = lanes[0] as DispatchRef;
    expect((await fixture().store.acquire(waiting, one, 50, 60_000, 't2')).kind).toBe('over');
    expect(await fixture().ns.redis.zscore(budget, `r:${waiting.dispatchId}`)).not.toBeNull();
    await withAdmin((admin) => admin.cancel(waiting.dispatchId));
    expect(await fixture().ns.redis.zscore(budget, `r:${waiting.dispatchId}`)).toBeNull();
  });

  it('of a cancel and an ACQUIRE racing, exactly one wins, 100 times over', async () => {
    const heads = await Promise.all(
      Array.from(
        { length: 100 },
        async (_, i) => (await enqueue(1, 'race', `j${i}`))[0] as DispatchRef,
      ),
    );
    const outcomes = await withAdmin((admin) =>
      Promise.all(
        heads.map(async (ref) => {
          const [verdict, cancel] = await Promise.all([
            acquire(ref),
            admin.cancel(ref.dispatchId).then(
              () => 'cancelled',
              (err: unknown) => (err instanceof NotCancellableError ? err.state : 'error'),
            ),
          ]);
          return { verdict: verdict.kind, cancel };
        }),
      ),
    );
    for (const { verdict, cancel } of outcomes) {
      if (verdict === 'go') expect(cancel).toBe('sending');
      else expect([verdict, cancel]).toEqual(['not-queued', 'cancelled']);
    }
    const events = await readEvents(fixture().ns.redis, fixture().ns.eventsStream);
    const cancelled = outcomes.filter((o) => o.cancel === 'cancelled').length;
    expect(events).toHaveLength(cancelled);
    expect(new Set(events.map((e) => e.dispatchId)).size).toBe(cancelled);
  });

  it('pauses a project: ACQUIRE spends nothing, other projects go on; resume hands back its parked jobs', async () => {
    const [a] = (await enqueue(1, 'A')) as [DispatchRef];
    const [b] = (await enqueue(1, 'B')) as [DispatchRef];
    const keys = keysFor(fixture().ns.prefix);
    expect(await withAdmin((admin) => admin.pauseProject('A'))).toEqual({
      projectId: 'A',
      paused: true,
      changed: true,
      woken: 0,
    });
    expect((await withAdmin((admin) => admin.pauseProject('A'))).changed).toBe(false);
    expect(await acquire(a)).toEqual({ kind: 'paused' });
    expect(await fixture().ns.redis.zcard(keys.budget('A'))).toBe(0);
    expect((await fixture().store.sends.get(a.dispatchId))?.attempts).toBe(0);
    expect((await acquire(b)).kind).toBe('go');
    await fixture().store.projects.noteParked('A', a.dispatchId);
    const resumed = await withAdmin((admin) => admin.resumeProject('A'));
    expect(resumed).toEqual({ projectId: 'A', paused: false, changed: true, woken: 1 });
    expect(
      await fixture().ns.redis.exists(keys.projectControls('A'), keys.projectPaused('A')),
    ).toBe(0);
    expect((await acquire(a)).kind).toBe('go');
  });

  it('a project limit replaces the default from the next ACQUIRE, over the sends before it; clearing restores it', async () => {
    const refs = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => (await enqueue(1, 'L', `j${i}`))[0] as DispatchRef),
    );
    const [r0, r1, r2] = refs as [DispatchRef, DispatchRef, DispatchRef];
    expect((await acquire(r0)).kind).toBe('go');
    expect(await withAdmin((admin) => admin.setProjectLimit('L', '1/1h'))).toEqual({
      projectId: 'L',
      limit: '1/1h',
      previous: null,
    });
    // The send before the change counts: the window of 1/1h is full.
    const over = await acquire(r1);
    expect(over.kind).toBe('over');
    const shown = await withAdmin((admin) => admin.showProject('L'));
    expect(shown).toMatchObject({
      projectId: 'L',
      paused: false,
      limit: '1/1h',
      limitSource: 'project',
      sendsInWindow: 1,
      reservedSlots: 1,
      queued: 3,
      sending: 1,
      tracked: 0,
      countsExact: true,
    });
    expect(Date.parse(shown.nextSlotAt ?? '')).toBeGreaterThan(Date.now() + 3_000_000);
    // Clearing it drops the slot reserved under it; the default lets the next ones go.
    expect(await withAdmin((admin) => admin.clearProjectLimit('L'))).toEqual({
      projectId: 'L',
      limit: null,
      previous: '1/1h',
    });
    expect((await acquire(r1)).kind).toBe('go');
    expect((await acquire(r2)).kind).toBe('go');
    const after = await withAdmin((admin) => admin.showProject('L'));
    expect(after).toMatchObject({ limit: '100/1m', limitSource: 'default', sendsInWindow: 3 });
  });

  it('refuses a malformed limit or project id naming the field, and changes nothing', async () => {
    const keys = keysFor(fixture().ns.prefix);
    const cases: [(a: Admin) => Promise<unknown>, string][] = [
      [(a: Admin) => a.setProjectLimit('P', '50 per hour'), 'limit'],
      [(a: Admin) => a.setProjectLimit('P', '0/1h'), 'limit'],
      [(a: Admin) => a.setProjectLimit('P', '5/0s'), 'limit'],
      [(a: Admin) => a.setProjectLimit('P', 7 as unknown as string), 'limit'],
      [(a: Admin) => a.pauseProject(''), 'projectId'],
      [(a: Admin) => a.pauseProject('a\nb'), 'projectId'],
      [(a: Admin) => a.cancel('x'.repeat(201)), 'dispatchId'],
    ];
    for (const [call, field] of cases) {
      const err = await withAdmin(call).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidControlError);
      expect(err).toMatchObject({ code: 'invalid_control', field });
    }
    expect(
      await fixture().ns.redis.exists(keys.projectControls('P'), keys.controlledProjects),
    ).toBe(0);
  });
});
