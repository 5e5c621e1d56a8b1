import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { logLines } from '../support/cli.js';
import { duplicates, waitForEvents } from '../support/events.js';
import { fleetEnv, grid, useFleet } from '../support/fleet.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { createNamespace, eventually } from '../support/namespace.js';
import { startService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';
import { laneIds, openDispatches } from '../support/where-is.js';

describe('the poller repairs a dispatch whose BullMQ job vanished', () => {
  const simulator = useSimulator({ workTimeMs: 200, sendLimit: { max: 20, windowMs: 2_000 } });
  const fleet = useFleet('repair', simulator);

  it('ends every follow-up in exactly one event after the dispatch queue is drained mid-run', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '20/2s', REPAIR_GRACE: '2s' });
    const pollers = startRoles('poller', 1, env);
    fleet().processes = [...startRoles('worker', 3, env), ...pollers];
    await waitForWorkers(ns, 3);
    const inputs = grid(simulator(), 5, 4, 10);
    const results = await producer.sendMany(inputs);

    // Behind the service's back: once some follow-ups went out, every waiting and delayed job of
    // the dispatch queue is removed, while their records stay queued in their lanes.
    await eventually(() => (simulator().deliveries.length >= 30 ? true : undefined), {
      timeoutMs: 30_000,
      what: '30 deliveries',
    });
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    let drained: number;
    try {
      const before = await queue.getJobCounts('wait', 'delayed', 'prioritized');
      drained = Object.values(before).reduce((a, b) => a + b, 0);
      await queue.drain(true);
      const after = await queue.getJobCounts('wait', 'delayed', 'prioritized');
      expect(Object.values(after).reduce((a, b) => a + b, 0)).toBe(0);
    } finally {
      await queue.close();
    }
    expect(drained).toBeGreaterThan(50);

    const events = await fleet()
      .events(inputs.length, 60_000)
      .catch(async (err: unknown) => {
        const seen = await ns.redis.xlen(ns.eventsStream);
        console.log(`drained ${drained} jobs; ${seen} of ${inputs.length} events after 60 s`);
        throw err;
      });
    expect(events).toHaveLength(200);
    expect(duplicates(events.map((e) => e.dispatchId))).toEqual([]);
    expect(new Set(events.map((e) => e.dispatchId))).toEqual(
      new Set(results.map((r) => r.dispatchId)),
    );
    expect(events.every((e) => e.type === 'followup.completed')).toBe(true);
    const deliveries = simulator().deliveries.map((d) => d.prompt);
    expect(duplicates(deliveries)).toEqual([]);
    expect(deliveries.sort()).toEqual(inputs.map((i) => i.prompt).sort());
    for (let p = 0; p < 5; p++)
      for (let j = 0; j < 4; j++)
        expect(await laneIds(ns.redis, ns.prefix, `p${p}`, `j${j}`)).toEqual([]);

    await stopAll(fleet().processes);
    const repaired = pollers.flatMap((p) =>
      logLines(p.output.stdout).filter((l) => l['msg'] === 'followup:repaired'),
    );
    console.log(`drained ${drained} jobs; the poller re-added ${repaired.length}`);
    expect(repaired.length).toBeGreaterThanOrEqual(1);
    expect(repaired.length).toBeLessThanOrEqual(drained);
    expect(duplicates(repaired.map((l) => l['dispatchId']))).toEqual([]);
  }, 120_000);
});

describe('the repair sweep, one case at a time', () => {
  const simulator = useSimulator();
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('replaces a job that ended while its record is queued, and ends a lost record with one event', async () => {
    const ns = createNamespace('repair-cases');
    cleanups.push(() => ns.cleanup());
    const keys = keysFor(ns.prefix);
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    cleanups.push(() => queue.close());
    // A poller only: nothing sends, so what the sweep does stays visible.
    const service = startService(ns, simulator(), { REPAIR_GRACE: '1s' }, { worker: false });
    cleanups.push(() => service.close());

    // Ended: something other than our worker ran the job to completion; the record stays queued.
    const ended = await service.producer.send({ projectId: 'p', jobId: 'a', prompt: 'a' });
    const intruder = new Worker(QUEUE_NAMES.dispatch, () => Promise.resolve('not ours'), {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    await eventually(
      async () => (await queue.getJobState(ended.dispatchId)) === 'completed' || undefined,
    );
    await intruder.close();
    const live = await service.producer.send({ projectId: 'p', jobId: 'b', prompt: 'b' });
    const lost = await service.producer.send({ projectId: 'p', jobId: 'c', prompt: 'c' });
    await ns.redis.del(keys.dispatch(lost.dispatchId));

    const replacement = `${ended.dispatchId}-f1`;
    await eventually(async () => (await queue.getJob(replacement)) ?? undefined, {
      what: 'the replacement job',
    });
    expect(await queue.getJobState(replacement)).toBe('waiting');
    expect(await ns.redis.hget(keys.dispatch(ended.dispatchId), 'bullJobId')).toBe(replacement);
    const [event] = await waitForEvents(ns.redis, ns.eventsStream, 1);
    expect(event).toMatchObject({ dispatchId: lost.dispatchId, type: 'followup.undeliverable' });
    expect(event?.event).toMatchObject({ reason: 'missing_record' });
    // The lost one is a lane of one: the sweep takes it out of its project's lane heads.
    await eventually(async () =>
      (await ns.redis.hget(keys.laneHeads('p'), 'c')) === null ? true : undefined,
    );

    // Two more passes change nothing: one job each, one event.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await queue.getJobState(live.dispatchId)).toBe('waiting');
    expect(await queue.getJob(`${ended.dispatchId}-f2`)).toBeUndefined();
    expect(await ns.redis.xlen(ns.eventsStream)).toBe(1);
    expect((await openDispatches(ns.redis, ns.prefix)).ids.sort()).toEqual(
      [ended.dispatchId, live.dispatchId].sort(),
    );
    const repairs = await service.metrics.registry.getSingleMetricAsString(
      'agent_dispatch_repairs_total',
    );
    expect(repairs).toContain('outcome="replaced"} 1');
    expect(repairs).toContain('outcome="orphaned"} 1');
    expect(repairs).not.toContain('readded');
  }, 30_000);

  it('takes a finished follow-up out of the open dispatches', async () => {
    const ns = createNamespace('repair-index');
    cleanups.push(() => ns.cleanup());
    const service = startService(ns, simulator());
    cleanups.push(() => service.close());
    simulator().seedJob('p', 'j');
    const { dispatchId } = await service.producer.send({ projectId: 'p', jobId: 'j', prompt: 'x' });
    expect(await openDispatches(ns.redis, ns.prefix)).toEqual({ count: 1, ids: [dispatchId] });
    await waitForEvents(ns.redis, ns.eventsStream, 1);
    expect(await openDispatches(ns.redis, ns.prefix)).toEqual({ count: 0, ids: [] });
  });
});
