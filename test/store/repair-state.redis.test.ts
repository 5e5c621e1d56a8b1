import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { sweepLostJobs } from '../../src/poller/repair.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { useStore } from '../support/store.js';

/**
 * Where the repair sweep stands in Redis: only the pass's own poller moves or ends it, and an
 * open-count key that cannot be read does not stop the sweep.
 */
describe('the repair pass in the store', () => {
  const fixture = useStore('repair-state');
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0)) await close();
  });

  it('moves or ends only the pass that began when the caller’s did, and never makes one again', async () => {
    const { ns, store } = fixture();
    const keys = keysFor(ns.prefix);
    const a = await store.poll.startRepairPass(60_000);
    expect(a).toMatchObject({ cursor: '0', checked: 0, ticks: 0 });
    if (!a) throw new Error('no pass');
    expect(a.endsAt - a.startedAt).toBe(60_000);
    expect(
      await store.poll.moveRepairCursor({ ...a, cursor: '500', checked: 500, tick: true }, 60_000),
    ).toBe(true);
    expect(await store.poll.startRepairPass(60_000)).toMatchObject({
      cursor: '500',
      checked: 500,
      ticks: 1,
    });

    // Pass `a` ends elsewhere and the next one begins, while a late poller still sweeps `a`.
    await ns.redis.del(keys.repairPass, keys.repairGate);
    await new Promise((r) => setTimeout(r, 5));
    const b = await store.poll.startRepairPass(60_000);
    expect(b?.startedAt).toBeGreaterThan(a.startedAt);
    const late = { startedAt: a.startedAt, checked: 1_000, tick: false };
    expect(await store.poll.moveRepairCursor({ ...late, cursor: '1500' }, 60_000)).toBe(false);
    expect(await store.poll.moveRepairCursor({ ...late, cursor: undefined }, 60_000)).toBe(false);
    expect(await ns.redis.hgetall(keys.repairPass)).toMatchObject({ cursor: '0', checked: '0' });
    expect(await ns.redis.exists(keys.repairLast)).toBe(0);

    // Its hash gone (expired, or ended by another poller): a move does not make it again.
    await ns.redis.del(keys.repairPass);
    const gone = { startedAt: b?.startedAt ?? 0, cursor: '7', checked: 1, tick: true };
    expect(await store.poll.moveRepairCursor(gone, 60_000)).toBe(false);
    expect(await ns.redis.exists(keys.repairPass)).toBe(0);
  });

  it('ends a pass with its duration and end in repair:last', async () => {
    const { ns, store } = fixture();
    const pass = await store.poll.startRepairPass(60_000);
    if (!pass) throw new Error('no pass');
    await new Promise((r) => setTimeout(r, 20));
    const end = { startedAt: pass.startedAt, cursor: undefined, checked: 0, tick: true };
    expect(await store.poll.moveRepairCursor(end, 60_000)).toBe(true);
    const last = await ns.redis.hgetall(keysFor(ns.prefix).repairLast);
    expect(Number(last['seconds'])).toBeGreaterThanOrEqual(0.02);
    expect(Number(last['endedAt']) - pass.startedAt).toBe(
      Math.round(Number(last['seconds']) * 1000),
    );
  });

  it('estimates the open ones from the open index when the open counts are not a hash', async () => {
    const { ns, producer, store } = fixture();
    const keys = keysFor(ns.prefix);
    // Two lanes of two: both lanes in the open index, each project counted.
    await producer.sendMany(
      ['a', 'b'].flatMap((p) => [1, 2].map((n) => ({ projectId: p, jobId: 'j', prompt: `${n}` }))),
    );
    expect(await store.poll.openEstimate()).toBe(4);
    await ns.redis.del(keys.openCounts);
    await ns.redis.set(keys.openCounts, 'a hand edit');
    expect(await store.poll.openEstimate()).toBe(await ns.redis.zcard(keys.open));

    // The sweep still runs its pass (the gate was set before the estimate), every tick.
    const config = ns.config({ REPAIR_GRACE: '1s', POLL_INTERVAL: '100ms' });
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    closing.push(() => queue.close());
    const ctx = { config, store, queue, metrics: createMetrics(), logger: createLogger('silent') };
    const ticks: boolean[] = [];
    while (!ticks.at(-1) && ticks.length < 5) ticks.push((await sweepLostJobs(ctx)).passEnded);
    expect(ticks.at(-1)).toBe(true);
    expect(await ns.redis.exists(keys.repairLast)).toBe(1);
  });

  it('sums more open counts than one read takes in parts', async () => {
    const { ns, store } = fixture();
    const keys = keysFor(ns.prefix);
    const counts = Array.from({ length: 2_500 }, (_, i) => [`p${i}`, '2']).flat();
    await ns.redis.hset(keys.openCounts, ...counts);
    expect(await store.poll.openEstimate()).toBe(5_000);
  });
});
