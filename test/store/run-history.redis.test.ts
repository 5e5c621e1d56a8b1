import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { RUN_HISTORY_TTL_MS, observedRunMs } from '../../src/store/run-history.js';
import { SENT_AT, sentRecord } from '../support/read-walk.js';
import { useStore } from '../support/store.js';

/** A run seen ended between two reads 1 s apart (`gapMs`). */
const seen = (runMs: number, gapMs = 1_000) => ({ runMs, gapMs });

describe("a project's run history", () => {
  const fixture = useStore('runs');

  it('keeps a decayed mean and spread that follow a change of run length', async () => {
    const { store } = fixture();
    const first = await store.poll.recordRun('p', seen(30_000));
    expect(first).toMatchObject({ runs: 1, meanMs: 30_000 });
    for (const ms of [28_000, 32_000, 29_000, 31_000, 30_000])
      await store.poll.recordRun('p', seen(ms));
    const steady = await store.poll.recordRun('p', seen(30_000));
    expect(steady?.runs).toBe(7);
    expect(Math.abs((steady?.meanMs ?? 0) - 30_000)).toBeLessThan(1_000);
    expect(Math.sqrt(steady?.varMs2 ?? 0)).toBeLessThan(3_000);
    // The project's runs now take a minute: within ten runs the history says so.
    let moved = steady;
    for (let i = 0; i < 10; i++) moved = await store.poll.recordRun('p', seen(60_000));
    expect(moved?.meanMs).toBeGreaterThan(58_000);
    // Claims read it, with the parks, in one go.
    const { runs } = await store.poll.projectReads(['p', 'q']);
    expect(runs.get('p')).toEqual(moved);
    expect(runs.has('q')).toBe(false);
  });

  it('keeps the spread of ends seen through wide gaps, however alike their middles', async () => {
    const { store } = fixture();
    // Runs of 54 to 66 s read by the growing schedule all end between its reads at 38.1 and
    // 70.1 s: every one is seen as 54.1 s.
    let stats = await store.poll.recordRun('p', seen(54_100, 32_000));
    for (let i = 0; i < 5; i++) stats = await store.poll.recordRun('p', seen(54_100, 32_000));
    // A 32 s gap alone has a spread of 32 / √12 = 9.2 s.
    expect(Math.sqrt(stats?.varMs2 ?? 0)).toBeGreaterThan(9_000);
    // Three runs then seen to the second weigh more than the gaps' guesses: the history narrows
    // to about their own spread (at the usual weight it would still be 6.3 s, mean 58.1 s).
    for (const ms of [58_000, 62_000, 60_000]) stats = await store.poll.recordRun('p', seen(ms));
    expect(Math.sqrt(stats?.varMs2 ?? 0)).toBeLessThan(4_500);
    expect(Math.abs((stats?.meanMs ?? 0) - 60_000)).toBeLessThan(1_000);
  });

  it('starts again from this run when the stored history cannot be read', async () => {
    const { store, ns } = fixture();
    await ns.redis.set(keysFor(ns.prefix).runs('p'), '5 30000.0 1000000.0');
    const stats = await store.poll.recordRun('p', seen(31_000));
    expect(stats).toMatchObject({ runs: 1, meanMs: 31_000 });
  });

  it('stays one short string per project, forgotten when unused', async () => {
    const { store, ns } = fixture();
    for (let i = 0; i < 500; i++)
      await store.poll.recordRun('p', seen(1_000 + (i % 7) * 1_000_000));
    const key = keysFor(ns.prefix).runs('p');
    expect(await ns.redis.type(key)).toBe('string');
    expect(await ns.redis.strlen(key)).toBeLessThanOrEqual(40);
    const ttl = await ns.redis.pttl(key);
    expect(ttl).toBeGreaterThan(RUN_HISTORY_TTL_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(RUN_HISTORY_TTL_MS);
    expect(await ns.redis.keys(`${ns.prefix}:runs:*`)).toEqual([key]);
  });

  it('takes a run into account only when its end was seen precisely', () => {
    const at = (activeMs: number) => sentRecord(1_000, { activeAt: SENT_AT + activeMs });
    expect(observedRunMs(at(29_000), SENT_AT + 30_000, 500)).toEqual(seen(29_500, 1_000));
    // The growing schedule's gaps (22.1 → 38.1 s) still count, at their middle.
    expect(observedRunMs(at(22_100), SENT_AT + 38_100, 500)).toEqual(seen(30_100, 16_000));
    // A quick run answered active at its send, seen ended by the first read (two and a half
    // POLL_MIN_INTERVALs after the send): its gap counts; one wider than three does not.
    expect(observedRunMs(at(50), SENT_AT + 1_250, 500)).toEqual(seen(650, 1_200));
    expect(observedRunMs(at(100), SENT_AT + 1_701, 500)).toBeUndefined();
    // A read long after the last active one (a backoff, a stopped poller) does not.
    expect(observedRunMs(at(5_000), SENT_AT + 30_000, 500)).toBeUndefined();
    // Seen active before this send (a previous attempt's), or never: nothing to go by.
    expect(observedRunMs(at(-1_000), SENT_AT + 30_000, 500)).toBeUndefined();
    expect(observedRunMs(sentRecord(1_000), SENT_AT + 30_000, 500)).toBeUndefined();
  });
});
