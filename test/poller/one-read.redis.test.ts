import { describe, expect, it } from 'vitest';
import { pollOne } from '../../src/poller/read.js';
import { keysFor } from '../../src/redis/keys.js';
import { readEvents, waitForEvents } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { pollerResources, useService } from '../support/service.js';

/**
 * One status read of a dispatch at a time. A claim leases a dispatch for its read, but a worker's
 * MARK_SENT (`unsettled` → `sent`, when a late answer comes) sets its next read anew, and a read
 * still under way (the lane stopped waiting for it after a second) then overlaps the next claim.
 * The poller reads it once, and a read whose snapshot went stale is read again soon.
 */

/** The status reads of this test answer this late: past the lane's one-second wait. */
const READ_LATENCY_MS = 1_500;

describe('status reads of one dispatch', () => {
  const { simulator, ns, start } = useService('one-read', { workTimeMs: 4_000 });

  it('never overlap, even when its next read is moved ahead while one is under way', async () => {
    simulator().seedJob('p', 'j');
    const service = start({ ACTIVE_GRACE: '1s' });
    const [sent] = await service.producer.sendMany([{ projectId: 'p', jobId: 'j', prompt: 'x' }]);
    const id = sent?.dispatchId as string;
    await eventually(() => simulator().deliveries.length === 1 || undefined, {
      what: 'the send',
    });
    simulator().setFaults({ latencyMs: READ_LATENCY_MS });
    const tracked = keysFor(ns().prefix).tracked;
    // What a late MARK_SENT does to a claimed dispatch, every 50 ms while the run goes on.
    const moving = setInterval(() => void ns().redis.zadd(tracked, 'XX', 0, id), 50);
    try {
      await waitForEvents(ns().redis, ns().eventsStream, 1, 20_000);
    } finally {
      clearInterval(moving);
    }
    const gets = simulator()
      .requests.filter((r) => r.kind === 'get' && r.jobId === 'j')
      .map((r) => r.at);
    expect(gets.length).toBeGreaterThan(1);
    // Each read arrives once the one before was answered (a read is answered READ_LATENCY_MS
    // after it arrives; a little slack for the clocks of one process).
    const gaps = gets.slice(1).map((at, i) => at - (gets[i] as number));
    expect(gaps.filter((gap) => gap < READ_LATENCY_MS - 50)).toEqual([]);
    expect((await readEvents(ns().redis, ns().eventsStream)).map((e) => e.dispatchId)).toEqual([
      id,
    ]);
  }, 30_000);

  it('is read again soon when its FINISH finds the record moved on since the read', async () => {
    simulator().seedJob('p', 'j', { status: 'completed' });
    const service = start({}, { worker: false, poller: false });
    const [sent] = await service.producer.sendMany([{ projectId: 'p', jobId: 'j', prompt: 'x' }]);
    const id = sent?.dispatchId as string;
    const keys = keysFor(ns().prefix);
    // A sent follow-up whose run was seen active, claimed for its read (leased a minute ahead).
    await ns().redis.hset(keys.dispatch(id), {
      state: 'sent',
      sentAt: Date.now(),
      seenActive: '1',
    });
    await ns().redis.zadd(keys.tracked, Date.now() + 60_000, id);
    const ctx = pollerResources(ns(), simulator());
    try {
      const record = await ctx.store.sends.get(id);
      if (!record) throw new Error(`no record for ${id}`);
      // The read's snapshot says `unsettled`; the record says `sent`: FINISH changes nothing.
      const polled = await pollOne(ctx, { ...record, state: 'unsettled' }, Date.now(), {
        on: false,
      });
      expect(await polled.acted).toBe(false);
      expect(await readEvents(ns().redis, ns().eventsStream)).toEqual([]);
      const due = Number(await ns().redis.zscore(keys.tracked, id));
      expect(due - Date.now()).toBeLessThan(1_000);
    } finally {
      await ctx.close();
    }
  });
});
