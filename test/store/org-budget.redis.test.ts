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
    // a2 keeps project a's turn until its org slot; a3 waits for project a's next turn, after it.
    const a2slot = Number(
      await ns().redis.zscore(orgKeys(ns().prefix).budget, `r:${a2!.dispatchId}`),
    );
    const budgetOf = (p: string) =>
      ns().redis.zrange(keysFor(ns().prefix).budget(p), 0, -1, 'WITHSCORES');
    const a = await budgetOf('a');
    expect(Number(a[a.indexOf(`r:${a2!.dispatchId}`) + 1])).toBe(a2slot);
    const [, a3wait] = waits as { kind: 'over'; untilMs: number }[];
    expect(a3wait!.untilMs).toBeGreaterThanOrEqual(a2slot);
    // Nothing of project a's or b's own budget was spent on the waiting ones: reservations only.
    const spent = (entries: string[]) =>
      entries.filter((e, i) => i % 2 === 0 && !e.startsWith('r:'));
    expect([spent(a), spent(await budgetOf('b'))]).toEqual([[`${a1!.dispatchId}:1`], []]);
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

  it("keeps a project's turn for the follow-up waiting for its org slot: a backlog paced by the org still flows", async () => {
    // The org's pace (1 per 1.5 s) is slower than the project's (1/s): each follow-up the project
    // lets through waits for the org, and must not lose its project turn to a sibling meanwhile.
    const paced = new DispatchStore(ns().redis, keysFor(ns().prefix), {
      eventsStream: ns().eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
      orgRate: budgetRate({ max: 1, windowMs: 1_500 }),
    });
    const project = budgetRate({ max: 1, windowMs: 1_000 });
    const refs = await sent('a', 'a', 'a', 'a', 'a');
    const started = Date.now();
    const wentAt: number[] = [];
    await Promise.all(
      refs.map(async (ref, i) => {
        // As a worker does: ACQUIRE again when the answer says, until it goes.
        while (Date.now() - started < 20_000) {
          const verdict = await paced.acquire(ref, project, project.toleranceMs, 60_000, `t${i}`);
          if (verdict.kind === 'go') return void wentAt.push(Date.now() - started);
          if (verdict.kind !== 'over') throw new Error(`unexpected ${verdict.kind}`);
          await new Promise((r) => setTimeout(r, Math.max(0, verdict.untilMs - Date.now())));
        }
      }),
    );
    expect(wentAt).toHaveLength(5);
    wentAt.sort((x, y) => x - y);
    // At the org's pace: about 1.5 s apart (less a tolerance), all within 5 × 1.5 s and a margin.
    for (let i = 1; i < wentAt.length; i++)
      expect(wentAt[i]! - wentAt[i - 1]!).toBeGreaterThan(1_000);
    expect(wentAt[4]!).toBeLessThan(12_000);
  });
});
