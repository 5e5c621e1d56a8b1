import { describe, expect, it } from 'vitest';
import { pollOne } from '../../src/poller/read.js';
import { keysFor } from '../../src/redis/keys.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { readEvents } from '../support/events.js';
import { pollerResources, useService } from '../support/service.js';

/**
 * `agent_dispatch_run_end_to_event_seconds`: from a run's end, taken as the middle of the gap
 * between the last read that saw it active (else its send) and the read that saw it ended, to its
 * event. Only a run seen ended counts: a follow-up that ends undeliverable has no run end.
 */

describe('the run end to event latency', () => {
  const { simulator, ns, start } = useService('run-end-latency');

  /** Sent follow-ups of jobs `jobIds`, as the poller would hold them; `fields` on their records. */
  async function sentFollowUps(jobIds: string[], fields: Record<string, string | number>[]) {
    const service = start({}, { worker: false, poller: false });
    const sent = await service.producer.sendMany(
      jobIds.map((jobId) => ({ projectId: 'p', jobId, prompt: 'x' })),
    );
    return Promise.all(
      sent.map(async ({ dispatchId }, i) => {
        const record = { state: 'sent', ...fields[i] };
        await ns().redis.hset(keysFor(ns().prefix).dispatch(dispatchId), record);
        return dispatchId;
      }),
    );
  }

  it('observes half the gap since the last active read, by type, once the event is written', async () => {
    simulator().seedJob('p', 'j', { status: 'completed' });
    const now = Date.now();
    const [id = ''] = await sentFollowUps(
      ['j'],
      [{ sentAt: now - 60_000, seenActive: '1', activeAt: now - 20_000 }],
    );
    const metrics = createMetrics();
    const ctx = pollerResources(ns(), simulator(), metrics);
    try {
      const record = await ctx.store.sends.get(id);
      if (!record) throw new Error(`no record for ${id}`);
      const polled = await pollOne(ctx, record, now, { on: false });
      expect(await polled.acted).toBe(true);
      expect((await readEvents(ns().redis, ns().eventsStream)).map((e) => e.type)).toEqual([
        'followup.completed',
      ]);
      const { values } = await metrics.runEndToEvent.get();
      const count = values.find((v) => v.metricName?.endsWith('_count'));
      const sum = values.find((v) => v.metricName?.endsWith('_sum'));
      expect(count).toMatchObject({ labels: { type: 'followup.completed' }, value: 1 });
      // 10 s (half of the 20 s since the last active read), plus the read and the FINISH.
      expect(sum?.value).toBeGreaterThanOrEqual(10);
      expect(sum?.value).toBeLessThan(15);
    } finally {
      await ctx.close();
    }
  });

  it('counts from the send when no read saw the run active; an undeliverable end is no run end', async () => {
    simulator().seedJob('p', 'quick', { status: 'failed' });
    simulator().seedJob('p', 'unknown', { status: 'completed' });
    const now = Date.now();
    // Sent 4 s ago, beyond ACTIVE_GRACE: a run too quick to be seen active, which failed; and a
    // send whose outcome is unknown and whose job was never seen active: it ends undeliverable
    // (ambiguous), with no run end.
    const [id = '', other = ''] = await sentFollowUps(
      ['quick', 'unknown'],
      [{ sentAt: now - 4_000 }, { sentAt: now - 4_000, state: 'unsettled' }],
    );
    const metrics = createMetrics();
    const ctx = pollerResources(ns(), simulator(), metrics);
    try {
      const record = await ctx.store.sends.get(id);
      if (!record) throw new Error(`no record for ${id}`);
      expect(await (await pollOne(ctx, record, now, { on: false })).acted).toBe(true);
      const { values } = await metrics.runEndToEvent.get();
      const sum = values.find((v) => v.metricName?.endsWith('_sum'));
      expect(sum?.labels).toEqual({ type: 'followup.failed' });
      expect(sum?.value).toBeGreaterThanOrEqual(2);
      expect(sum?.value).toBeLessThan(7);

      const unsettled = await ctx.store.sends.get(other);
      if (!unsettled) throw new Error(`no record for ${other}`);
      expect(await (await pollOne(ctx, unsettled, now, { on: false })).acted).toBe(true);
      expect((await readEvents(ns().redis, ns().eventsStream)).map((e) => e.type)).toEqual([
        'followup.failed',
        'followup.undeliverable',
      ]);
      const counts = (await metrics.runEndToEvent.get()).values.filter((v) =>
        v.metricName?.endsWith('_count'),
      );
      expect(counts.map((c) => c.labels['type'])).toEqual(['followup.failed']);
    } finally {
      await ctx.close();
    }
  });
});
