import { describe, expect, it } from 'vitest';
import { OPEN_WALK_START, type DispatchStore, type OpenDispatch } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

/** Walks every open dispatch from the start, `count` at a time, as the repair sweep does. */
async function walk(store: DispatchStore, count: number, enqueuedBy = Number.MAX_SAFE_INTEGER) {
  const seen: OpenDispatch[] = [];
  let pages = 0;
  for (let cursor: string | undefined = OPEN_WALK_START; cursor !== undefined; pages++) {
    const page = await store.open.page(cursor, count, enqueuedBy);
    seen.push(...page.dispatches);
    cursor = page.next(0);
    if (pages > 1_000) throw new Error(`the walk did not end: at ${cursor}`);
  }
  return { seen, pages };
}

const ids = (dispatches: readonly OpenDispatch[]) => dispatches.map((d) => d.dispatchId).sort();

/**
 * The open dispatches without an index entry for a lane of one (store/open-index.ts): the
 * walk finds each open dispatch, wherever it is kept, and counts it.
 */
describe('the walk of the open dispatches', () => {
  const fixture = useStore('open-walk');

  it('keeps a lane of one out of the open index, and a lane of two in it, the head by its own time', async () => {
    const { ns, producer, store } = fixture();
    const keys = keysFor(ns.prefix);
    const alone = await producer.send({ projectId: 'p', jobId: 'a', prompt: 'x' });
    const head = await producer.send({ projectId: 'p', jobId: 'b', prompt: 'x' });
    expect(await ns.redis.zcard(keys.open)).toBe(0);
    expect(await ns.redis.zrange(keys.laneProjects, 0, -1)).toEqual(['1.p']);

    await new Promise((r) => setTimeout(r, 5));
    const second = await producer.send({ projectId: 'p', jobId: 'b', prompt: 'y' });
    const index = await ns.redis.zrange(keys.open, 0, -1, 'WITHSCORES');
    expect(index).toEqual([
      head.dispatchId,
      await ns.redis.hget(keys.dispatch(head.dispatchId), 'enqueuedAt'),
      second.dispatchId,
      await ns.redis.hget(keys.dispatch(second.dispatchId), 'enqueuedAt'),
    ]);
    expect(Number(index[1])).toBeLessThan(Number(index[3]));

    const { seen } = await walk(store, 10);
    expect(ids(seen)).toEqual([alone.dispatchId, head.dispatchId, second.dispatchId].sort());
    expect(seen.find((d) => d.dispatchId === alone.dispatchId)).toMatchObject({
      laneOfOne: true,
      projectId: 'p',
      jobId: 'a',
      state: 'queued',
    });
    expect(seen.find((d) => d.dispatchId === head.dispatchId)?.laneOfOne).toBe(false);
    expect(await store.open.count()).toBe(3);
  });

  it('finds each of 1,300 open dispatches once, a page at a time, over projects large and small', async () => {
    const { producer, store } = fixture();
    // A project of 1,200 lanes of one (its lane heads a hash table, scanned in steps), 90 projects
    // of one lane each, and a lane of ten in the open index.
    const batch = [
      ...Array.from({ length: 1_200 }, (_, i) => ({ projectId: 'big', jobId: `j${i}` })),
      ...Array.from({ length: 90 }, (_, i) => ({ projectId: `small-${i}`, jobId: 'j' })),
      ...Array.from({ length: 10 }, () => ({ projectId: 'lane', jobId: 'j' })),
    ].map((f, i) => ({ ...f, prompt: `#${i}` }));
    const results = await producer.sendMany(batch);

    const { seen, pages } = await walk(store, 100);
    expect(ids(seen)).toEqual(results.map((r) => r.dispatchId).sort());
    expect(pages).toBeGreaterThanOrEqual(13);
    expect(await store.open.count()).toBe(1_300);
  });

  it('leaves out a dispatch younger than asked, and walks past it', async () => {
    const { ns, producer, store } = fixture();
    const old = await producer.send({ projectId: 'p', jobId: 'a', prompt: 'x' });
    const young = await producer.send({ projectId: 'q', jobId: 'a', prompt: 'x' });
    const keys = keysFor(ns.prefix);
    await ns.redis.hset(keys.dispatch(old.dispatchId), 'enqueuedAt', 1_000);
    await ns.redis.hset(keys.dispatch(young.dispatchId), 'enqueuedAt', 3_000);

    expect(ids((await walk(store, 1, 2_000)).seen)).toEqual([old.dispatchId]);
  });

  it('takes a lane of one out only while it heads its lane, and forgets a project left empty', async () => {
    const { ns, producer, store } = fixture();
    const keys = keysFor(ns.prefix);
    const lost = await producer.send({ projectId: 'p', jobId: 'a', prompt: 'x' });
    await ns.redis.del(keys.dispatch(lost.dispatchId));
    const [found] = (await walk(store, 10)).seen;
    expect(found).toMatchObject({ dispatchId: lost.dispatchId, state: undefined, laneOfOne: true });

    // Meanwhile another follow-up to the same agent job made the lane a list: it is left as it is.
    const next = await producer.send({ projectId: 'p', jobId: 'a', prompt: 'y' });
    await store.open.drop([found as OpenDispatch]);
    expect(await ns.redis.lrange(keys.lane('p', 'a'), 0, -1)).toEqual([
      lost.dispatchId,
      next.dispatchId,
    ]);
    // The walk is done with it (the sweep published its orphan event): only `next` is left open.
    expect(await ns.redis.zrange(keys.open, 0, -1)).toEqual([next.dispatchId]);

    // A head that still heads its lane of one is taken out. A walk forgets a project without a
    // lane of one: `p` now (its lane is a list), then `q`.
    const other = await producer.send({ projectId: 'q', jobId: 'b', prompt: 'x' });
    await ns.redis.del(keys.dispatch(other.dispatchId));
    const lostHead = (await walk(store, 10)).seen.find((d) => d.dispatchId === other.dispatchId);
    expect(await ns.redis.zrange(keys.laneProjects, 0, -1)).toEqual(['1.q']);
    await store.open.drop([lostHead as OpenDispatch]);
    expect(await ns.redis.hlen(keys.laneHeads('q'))).toBe(0);
    await walk(store, 10);
    expect(await ns.redis.zrange(keys.laneProjects, 0, -1)).toEqual([]);
    expect(await store.open.count()).toBe(1);
  });

  it('walks past a record that is not a hash (a hand edit), in the index and as a lane of one', async () => {
    const { ns, producer, store } = fixture();
    const keys = keysFor(ns.prefix);
    const sent = await producer.sendMany([
      { projectId: 'p', jobId: 'two', prompt: 'a' },
      { projectId: 'p', jobId: 'two', prompt: 'b' },
      { projectId: 'p', jobId: 'one', prompt: 'c' },
      { projectId: 'p', jobId: 'alone', prompt: 'd' },
    ]);
    const [head, , one] = sent.map((s) => s.dispatchId);
    for (const id of [head, one]) {
      await ns.redis.del(keys.dispatch(id!));
      await ns.redis.set(keys.dispatch(id!), 'not a hash');
    }
    // Nothing the walk can say of them: they are left where they are, and the others are read.
    const { seen } = await walk(store, 2);
    expect(ids(seen)).toEqual([sent[1]!.dispatchId, sent[3]!.dispatchId].sort());
    expect(await ns.redis.zscore(keys.open, head!)).not.toBeNull();
  });
});
