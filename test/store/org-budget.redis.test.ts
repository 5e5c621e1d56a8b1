import { beforeEach, describe, expect, it } from 'vitest';
import { createProducer, type Producer } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { orgKeys } from '../../src/redis/org-keys.js';
import { budgetRate } from '../../src/dispatch/budget.js';
import { StoreItemError } from '../../src/store/call-batch.js';
import { DispatchStore, type DispatchRef } from '../../src/store/store.js';
import { useNamespace } from '../support/namespace.js';

/** ACQUIRE with ORG_RATE_LIMIT: the org log beside the projects', one reservation per project. */
describe('the org budget in ACQUIRE', () => {
  const ns = useNamespace('org-budget');
  const rate = { max: 100, windowMs: 60_000 };
  let store: DispatchStore;
  let producer: Producer;
  beforeEach(() => {
    store = new DispatchStore(ns().redis, keysFor(ns().prefix), {
      eventsStream: ns().eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
      orgRate: budgetRate({ max: 1, windowMs: 60_000 }),
    });
    producer = createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix });
    return () => producer.close();
  });

  async function sent(...projects: string[]): Promise<DispatchRef[]> {
    const results = await producer.sendMany(
      projects.map((projectId, i) => ({ projectId, jobId: `j${i}`, prompt: `to ${projectId}` })),
    );
    return results.map(({ dispatchId }, i) => ({
      dispatchId,
      projectId: projects[i]!,
      jobId: `j${i}`,
    }));
  }
  const acquire = (ref: DispatchRef, token: string) => store.acquire(ref, rate, 500, 60_000, token);
  const orgLog = () => ns().redis.zrange(orgKeys(ns().prefix).budget, 0, -1);

  it('reserves one org slot per project at a time, in time order, and spends none of the project budget meanwhile', async () => {
    const [a1, a2, a3, b1] = await sent('a', 'a', 'a', 'b');
    expect((await acquire(a1!, 'T1')).kind).toBe('go');
    const waits = [await acquire(a2!, 'T2'), await acquire(a3!, 'T3'), await acquire(b1!, 'T4')];
    expect(waits.map((w) => w.kind)).toEqual(['over', 'over', 'over']);
    // a2 holds project a's turn, b1 the next: a3 waits without a reservation of its own.
    expect(await orgLog()).toEqual([
      `${a1!.dispatchId}:1`,
      `r:${a2!.dispatchId}`,
      `r:${b1!.dispatchId}`,
    ]);
    const [, a3wait, b1wait] = waits as { kind: 'over'; untilMs: number }[];
    expect(a3wait!.untilMs).toBeGreaterThanOrEqual(b1wait!.untilMs);
    // Nothing of project a's or b's own budget went to the waiting ones.
    const budgets = await Promise.all(
      ['a', 'b'].map((p) => ns().redis.zrange(keysFor(ns().prefix).budget(p), 0, -1)),
    );
    expect(budgets).toEqual([[`${a1!.dispatchId}:1`], []]);
  });

  it('gives the org entry back with the grant of a send never written', async () => {
    const [a1, b1] = await sent('a', 'b');
    expect((await acquire(a1!, 'T1')).kind).toBe('go');
    await store.tracking.requeue(a1!, 1, 'T1', 'unwritten');
    expect(await orgLog()).toEqual([]);
    expect((await acquire(b1!, 'T2')).kind).toBe('go');
  });

  it('fails every item of the call, naming the key, when the org log is of the wrong type', async () => {
    const [a1, b1] = await sent('a', 'b');
    const key = orgKeys(ns().prefix).budget;
    await ns().redis.set(key, 'overwritten by hand');
    const results = await Promise.allSettled([acquire(a1!, 'T1'), acquire(b1!, 'T2')]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as StoreItemError;
      expect(err).toBeInstanceOf(StoreItemError);
      expect(err.key).toBe(key);
    }
    expect((await store.sends.get(a1!.dispatchId))?.state).toBe('queued');
    expect(await ns().redis.exists(keysFor(ns().prefix).budget('a'))).toBe(0);
  });
});
