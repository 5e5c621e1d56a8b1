import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import {
  RUN_HISTORY_TTL_MS,
  endInGap,
  observedRunMs,
  runBeyond,
  type RunStats,
} from '../../src/store/run-history.js';
import { SENT_AT, sentRecord } from '../support/read-walk.js';
import { useStore } from '../support/store.js';

/** A run seen ended at `atMs` between two reads 1 s apart (`gapMs`): evenly likely anywhere. */
const ended = (runMs: number, gapMs: number, atMs: number) => ({
  runMs,
  varMs2: Math.round(gapMs ** 2 / 12),
  atMs,
});
/** The clock of the runs that `seen` reports. */
let clockMs = SENT_AT;
/** A run seen ended `apartMs` after the one before (a minute: each weighs fully). */
const seen = (runMs: number, gapMs = 1_000, apartMs = 60_000) =>
  ended(runMs, gapMs, (clockMs += apartMs));

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

  it('weighs the runs of a burst alike, not its longest, which end last', async () => {
    const { store } = fixture();
    // Runs of 81 to 99 s, sent together: they end in the order of their lengths, within 18 s.
    const burst = Array.from({ length: 19 }, (_, i) => 81_000 + i * 1_000);
    let stats: RunStats | undefined;
    for (const ms of burst) stats = await store.poll.recordRun('p', seen(ms, 1_000, 1_000));
    // A young history is their plain mean.
    expect(Math.abs((stats?.meanMs ?? 0) - 90_000)).toBeLessThan(100);
    // The next bursts, each a while after the last: the longest of each, ending last, do not
    // pull the mean up (at a weight of 0.3 each it would sit at 96.7 s), nor the spread in
    // (the runs' own: 5.5 s).
    for (let round = 0; round < 3; round++) {
      await store.poll.recordRun('p', seen(burst[0] ?? 0, 1_000, 120_000));
      for (const ms of burst.slice(1))
        stats = await store.poll.recordRun('p', seen(ms, 1_000, 1_000));
    }
    expect(Math.abs((stats?.meanMs ?? 0) - 90_000)).toBeLessThan(2_500);
    expect(Math.sqrt(stats?.varMs2 ?? 0)).toBeGreaterThan(4_500);
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
    expect(await ns.redis.strlen(key)).toBeLessThanOrEqual(56);
    const ttl = await ns.redis.pttl(key);
    expect(ttl).toBeGreaterThan(RUN_HISTORY_TTL_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(RUN_HISTORY_TTL_MS);
    expect(await ns.redis.keys(`${ns.prefix}:runs:*`)).toEqual([key]);
  });

  it('takes a run into account only when its end was seen precisely', () => {
    const at = (activeMs: number) => sentRecord(1_000, { activeAt: SENT_AT + activeMs });
    expect(observedRunMs(at(29_000), SENT_AT + 30_000, 500)).toEqual(
      ended(29_500, 1_000, SENT_AT + 30_000),
    );
    // The growing schedule's gaps (22.1 → 38.1 s) still count, at their middle.
    expect(observedRunMs(at(22_100), SENT_AT + 38_100, 500)).toEqual(
      ended(30_100, 16_000, SENT_AT + 38_100),
    );
    // A quick run answered active at its send, seen ended by the first read (two and a half
    // POLL_MIN_INTERVALs after the send): its gap counts; one wider than three does not.
    expect(observedRunMs(at(50), SENT_AT + 1_250, 500)).toEqual(ended(650, 1_200, SENT_AT + 1_250));
    expect(observedRunMs(at(100), SENT_AT + 1_701, 500)).toBeUndefined();
    // A read long after the last active one (a backoff, a stopped poller) does not.
    expect(observedRunMs(at(5_000), SENT_AT + 30_000, 500)).toBeUndefined();
    // Seen active before this send (a previous attempt's), or never: nothing to go by.
    expect(observedRunMs(at(-1_000), SENT_AT + 30_000, 500)).toBeUndefined();
    expect(observedRunMs(sentRecord(1_000), SENT_AT + 30_000, 500)).toBeUndefined();
  });

  it('places an end seen through a wide gap where history expects it, not at its middle', () => {
    // Runs of 90 s ± 3 s: one that ended at 84 s, before the dense window, is seen by the
    // window's first read at 88 s, after the last early read at 32 s.
    const history: RunStats = { runs: 20, meanMs: 90_000, varMs2: 3_000 ** 2 };
    const early = observedRunMs(
      sentRecord(1_000, { activeAt: SENT_AT + 32_000 }),
      SENT_AT + 88_000,
      500,
      history,
    );
    // Not left out, and not counted at the gap's middle (60 s): near the gap's end, where the
    // history's runs that end in it end, and about as uncertain as the gap's part of the spread.
    expect(early?.runMs).toBeGreaterThan(85_000);
    expect(early?.runMs).toBeLessThan(88_000);
    expect(Math.sqrt(early?.varMs2 ?? 0)).toBeLessThan(2_000);
    // Without a history it would be left out, as before.
    expect(
      observedRunMs(sentRecord(1_000, { activeAt: SENT_AT + 32_000 }), SENT_AT + 88_000, 500),
    ).toBeUndefined();
    // A gap that holds the whole history tells nothing new: its guess is the history itself.
    const away = endInGap(10_000, 200_000, history);
    expect(Math.abs((away?.runMs ?? 0) - 90_000)).toBeLessThan(10);
    expect(Math.abs(Math.sqrt(away?.varMs2 ?? 0) - 3_000)).toBeLessThan(10);
    // A short gap keeps to itself: never outside it, never wider than it.
    const close = endInGap(91_000, 92_000, history);
    expect(close?.runMs).toBeGreaterThanOrEqual(91_000);
    expect(close?.runMs).toBeLessThanOrEqual(92_000);
    expect(close?.varMs2).toBeLessThanOrEqual(1_000 ** 2 / 12);
    // A gap far from every run of the history: its middle, as without a history.
    expect(endInGap(20_000, 30_000, history)).toBeUndefined();
    expect(
      observedRunMs(
        sentRecord(1_000, { activeAt: SENT_AT + 20_000 }),
        SENT_AT + 30_000,
        500,
        history,
      ),
    ).toEqual(ended(25_000, 10_000, SENT_AT + 30_000));
  });

  it("turns irregular when a burst's long runs go on past its short ones' window", async () => {
    const { store } = fixture();
    // The short half of a burst ends first: the history says 27 s ± 1.5 s.
    let stats: RunStats | undefined;
    for (const ms of [25_000, 26_000, 27_000, 28_000, 29_000])
      stats = await store.poll.recordRun('p', seen(ms, 500, 1_000));
    expect(Math.sqrt(stats?.varMs2 ?? 0) / (stats?.meanMs ?? 1)).toBeLessThan(0.25);
    // The long half is still going at 40 s: as each says so, the spread grows past what a window
    // pays for (LEARN_MAX_CV), so the rest are read on the growing schedule.
    for (let i = 0; i < 5 && stats; i++)
      stats = await store.poll.recordRun('p', {
        ...runBeyond(40_000, stats),
        atMs: (clockMs += 500),
      });
    expect(Math.sqrt(stats?.varMs2 ?? 0) / (stats?.meanMs ?? 1)).toBeGreaterThan(0.25);
    // A run a little past the mean is told as the history's long runs go; one far past, as
    // at least that long.
    const h: RunStats = { runs: 10, meanMs: 30_000, varMs2: 1_000 ** 2 };
    expect(runBeyond(31_000, h).runMs).toBeGreaterThan(31_000);
    expect(runBeyond(31_000, h).runMs).toBeLessThan(33_000);
    expect(runBeyond(90_000, h)).toEqual({ runMs: 90_000, varMs2: 1_000 ** 2 });
  });

  it('keeps a run still going from lessening the weight of its end, and a time gone wrong', async () => {
    const { store, ns } = fixture();
    const key = keysFor(ns.prefix).runs('p');
    const timeOf = async () => Number((await ns.redis.get(key))?.split(' ')[4]);
    // Runs of 30 s ± 1.5 s; one takes 40 s. Told only at its end, 106 s after the last run:
    const T0 = Date.now() - 3_600_000;
    const going = { runMs: 34_400, varMs2: 2_250_000, atMs: T0 + 100_000, going: true };
    await ns.redis.set(key, `20 30000.0 2250000.0 0 ${T0}`);
    const endAlone = await store.poll.recordRun('p', ended(40_000, 500, T0 + 106_000));
    // Told first as going on past its window, at 34.4 s (weighing 0.3: 31.3 s), then at its end:
    // the going run leaves the time as it was, so the end weighs fully too (at the going run's
    // time, it would weigh 0.06: 31.8 s).
    await ns.redis.set(key, `20 30000.0 2250000.0 0 ${T0}`);
    await store.poll.recordRun('p', going);
    expect(await timeOf()).toBe(T0);
    const both = await store.poll.recordRun('p', ended(40_000, 500, T0 + 106_000));
    expect(both?.meanMs).toBeGreaterThan(33_500);
    expect(both?.meanMs).toBeGreaterThanOrEqual(endAlone?.meanMs ?? Infinity);
    // A history without its time counts as told long ago: the next run weighs fully.
    await ns.redis.set(key, '20 30000.0 2250000.0 0');
    const untimed = await store.poll.recordRun('p', ended(40_000, 500, T0 + 106_000));
    expect(untimed).toEqual(endAlone);
    // A time ahead of Redis's clock (a clock stepped back): the same, and the run's own time is
    // kept; for a run still going, one that leaves its end apart from it.
    const ahead = `20 30000.0 2250000.0 0 ${T0 + 10 ** 11}`;
    await ns.redis.set(key, ahead);
    expect(await store.poll.recordRun('p', ended(40_000, 500, T0 + 106_000))).toEqual(endAlone);
    expect(await timeOf()).toBe(T0 + 106_000);
    await ns.redis.set(key, ahead);
    await store.poll.recordRun('p', going);
    expect(await store.poll.recordRun('p', ended(40_000, 500, T0 + 106_000))).toEqual(both);
    // A run read a while before the last (its claim's time) counts as ending with it.
    await ns.redis.set(key, `20 30000.0 2250000.0 0 ${T0}`);
    const stale = await store.poll.recordRun('p', ended(40_000, 500, T0 - 60_000));
    expect(stale?.meanMs).toBeLessThan(30_500);
    expect(await timeOf()).toBe(T0);
  });
});
