import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createAdmin } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { DispatchStore } from '../../src/store/store.js';
import { waitForEvents } from '../support/events.js';
import { eventually, type Namespace } from '../support/namespace.js';
import { useService } from '../support/service.js';
import { openDispatches } from '../support/where-is.js';

/**
 * The per-project open counts (`project show`, the follow-ups page) follow a follow-up out of the
 * open dispatches whichever way it leaves them, not only through FINISH: a lost record ended by
 * the worker (its job names no record) or by the repair sweep, and a job that fails for good.
 */
describe('the open counts of follow-ups that end outside FINISH', () => {
  const service = useService('open-count-ends', { workTimeMs: 60_000 });

  async function counts(ns: Namespace, projectId: string) {
    const store = new DispatchStore(ns.redis, keysFor(ns.prefix), {
      eventsStream: ns.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
    });
    const shown = await store.projects.show(projectId, {
      max: 100,
      windowMs: 60_000,
      toleranceMs: 0,
    });
    return { queued: shown.queued, sending: shown.sending, tracked: shown.tracked };
  }

  /** Registers two follow-ups of one agent job (a lane of two) and one alone, then loses them. */
  async function lostRecords(projectId: string): Promise<string[]> {
    const registrar = service.start({}, { worker: false, poller: false });
    const sent = await registrar.producer.sendMany([
      { projectId, jobId: 'two', prompt: 'a' },
      { projectId, jobId: 'two', prompt: 'b' },
      { projectId, jobId: 'one', prompt: 'c' },
    ]);
    const ns = service.ns();
    expect(await counts(ns, projectId)).toEqual({ queued: 3, sending: 0, tracked: 0 });
    const keys = keysFor(ns.prefix);
    for (const { dispatchId } of sent) await ns.redis.del(keys.dispatch(dispatchId));
    return sent.map((s) => s.dispatchId);
  }

  it('the worker ends a job without a record (the poison path): counts back to 0', async () => {
    const ids = await lostRecords('poisoned');
    service.start({}, { poller: false });
    const events = await waitForEvents(service.ns().redis, service.ns().eventsStream, 3, 15_000);
    expect(events.map((e) => e.dispatchId).sort()).toEqual([...ids].sort());
    expect(events.every((e) => e.event['reason'] === 'missing_record')).toBe(true);
    expect(await counts(service.ns(), 'poisoned')).toEqual({ queued: 0, sending: 0, tracked: 0 });
  }, 20_000);

  it('the repair sweep ends a lost record: counts back to 0', async () => {
    const ids = await lostRecords('swept');
    service.start({ REPAIR_GRACE: '1s' }, { worker: false });
    const events = await waitForEvents(service.ns().redis, service.ns().eventsStream, 3, 15_000);
    expect(events.map((e) => e.dispatchId).sort()).toEqual([...ids].sort());
    await eventually(
      async () =>
        (await openDispatches(service.ns().redis, service.ns().prefix)).count === 0
          ? true
          : undefined,
      { what: 'no open dispatch' },
    );
    expect(await counts(service.ns(), 'swept')).toEqual({ queued: 0, sending: 0, tracked: 0 });
  }, 20_000);

  it('a sent follow-up whose record is lost while tracked: counts back to 0', async () => {
    const running = service.start({ REPAIR_GRACE: '1s' });
    service.simulator().seedJob('tracked', 'slow');
    const { dispatchId } = await running.producer.send({
      projectId: 'tracked',
      jobId: 'slow',
      prompt: 'x',
    });
    const ns = service.ns();
    await eventually(
      async () =>
        (await running.producer.status(dispatchId))?.state === 'sent' ? true : undefined,
      { what: 'sent' },
    );
    expect(await counts(ns, 'tracked')).toEqual({ queued: 0, sending: 0, tracked: 1 });
    await ns.redis.del(keysFor(ns.prefix).dispatch(dispatchId));
    const [event] = await waitForEvents(ns.redis, ns.eventsStream, 1, 15_000);
    expect(event).toMatchObject({ dispatchId, type: 'followup.undeliverable' });
    expect(await counts(ns, 'tracked')).toEqual({ queued: 0, sending: 0, tracked: 0 });
  }, 20_000);

  it('a lost sent record is counted down as sent, not as a queued one of its project', async () => {
    const sender = service.start({ REPAIR_GRACE: '1s' });
    service.simulator().seedJob('mixed', 'slow');
    const { dispatchId } = await sender.producer.send({
      projectId: 'mixed',
      jobId: 'slow',
      prompt: 'x',
    });
    const ns = service.ns();
    await eventually(
      async () => ((await sender.producer.status(dispatchId))?.state === 'sent' ? true : undefined),
      { what: 'sent' },
    );
    await sender.close();
    const registrar = service.start({}, { worker: false, poller: false });
    await registrar.producer.send({ projectId: 'mixed', jobId: 'other', prompt: 'y' });
    expect(await counts(ns, 'mixed')).toEqual({ queued: 1, sending: 0, tracked: 1 });
    await ns.redis.del(keysFor(ns.prefix).dispatch(dispatchId));
    service.start({ REPAIR_GRACE: '1s' }, { worker: false });
    const [event] = await waitForEvents(ns.redis, ns.eventsStream, 1, 15_000);
    expect(event).toMatchObject({ dispatchId, type: 'followup.undeliverable' });
    // The sweep's pass over the lost one's lane heads entry publishes nothing more.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await counts(ns, 'mixed')).toEqual({ queued: 1, sending: 0, tracked: 0 });
  }, 30_000);

  it('a lost head of a lane of two lets its parked next go on at once', async () => {
    const ns = service.ns();
    service.simulator().seedJob('laned', 'two');
    const running = service.start({}, { poller: false });
    const admin = createAdmin({ redisUrl: ns.redisUrl, prefix: ns.prefix });
    try {
      await admin.pauseProject('laned');
      const [first, second] = await running.producer.sendMany([
        { projectId: 'laned', jobId: 'two', prompt: 'a' },
        { projectId: 'laned', jobId: 'two', prompt: 'b' },
      ]);
      const queue = new Queue(QUEUE_NAMES.dispatch, {
        connection: ns.redis.duplicate(),
        prefix: ns.prefix,
      });
      try {
        // The second waits for its lane (parked for its own recheck, 30 s), the first for the resume.
        await eventually(
          async () =>
            (await queue.getJobState(second?.dispatchId ?? '')) === 'delayed' &&
            (await queue.getJobState(first?.dispatchId ?? '')) === 'delayed'
              ? true
              : undefined,
          { what: 'both parked' },
        );
      } finally {
        await queue.close();
      }
      await ns.redis.del(keysFor(ns.prefix).dispatch(first?.dispatchId ?? ''));
      await admin.resumeProject('laned');
      await eventually(
        async () => {
          const state = (await running.producer.status(second?.dispatchId ?? ''))?.state;
          return state === 'sent' || state === 'done' ? true : undefined;
        },
        { what: 'the next one sent', timeoutMs: 10_000 },
      );
    } finally {
      await admin.close();
    }
  }, 30_000);

  it('an events stream of the wrong type sets no marker: the event goes out once repaired', async () => {
    const ns = service.ns();
    const store = new DispatchStore(ns.redis, keysFor(ns.prefix), {
      eventsStream: ns.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
    });
    await ns.redis.set(ns.eventsStream, 'not a stream');
    const orphan = { bullJobId: 'lost-1', dispatchId: 'lost-1' };
    await expect(store.tracking.publishOrphan(orphan, {}, 'missing_record')).rejects.toThrow(
      /WRONGTYPE/,
    );
    await ns.redis.del(ns.eventsStream);
    expect(await store.tracking.publishOrphan(orphan, {}, 'missing_record')).toBe('published');
    expect(await ns.redis.xlen(ns.eventsStream)).toBe(1);
  });
});
