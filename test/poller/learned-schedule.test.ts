import { describe, expect, it } from 'vitest';
import type { RunStats } from '../../src/store/run-history.js';
import { firstRead } from '../../src/dispatch/read-schedule.js';
import { planReads } from '../../src/poller/learned-schedule.js';
import { actionForRead } from '../../src/poller/read.js';
import { READ_DEFAULTS, readTimes, SENT_AT, sentRecord } from '../support/read-walk.js';

/**
 * The learned read schedule (POLL_LEARN), walked through actionForRead: a project's history in,
 * read times out, against the growing schedule on the same runs.
 */

const LEARN = { ...READ_DEFAULTS, pollLearn: true };

/** A history of `runs` runs of `meanMs`, spread evenly over ±`share` (a uniform spread). */
function history(meanMs: number, share: number, runs = 3): RunStats {
  return { runs, meanMs, varMs2: (meanMs * share) ** 2 / 3 };
}

/**
 * Reads and run end → last read for 100 runs spread evenly over `meanMs` ± `share`, each sent with
 * an answer that showed it active (`answeredActive`, as nearly every send is) or not.
 */
function walk(meanMs: number, share: number, runs?: RunStats, answeredActive = true) {
  const reads: number[] = [];
  const lateMs: number[] = [];
  const first = firstRead(answeredActive, LEARN);
  for (let i = 0; i < 100; i++) {
    const runMs = meanMs * (1 - share + (2 * share * (i + 0.5)) / 100);
    const times = readTimes(runMs, LEARN, runs, first);
    reads.push(times.length);
    lateMs.push((times.at(-1) as number) - runMs);
  }
  const sorted = [...lateMs].sort((a, b) => a - b);
  return {
    meanReads: reads.reduce((a, b) => a + b, 0) / reads.length,
    p50: sorted[49] as number,
    p99: sorted[98] as number,
  };
}

describe('the learned read schedule', () => {
  it.each([8_000, 30_000, 120_000, 300_000])(
    'sees a regular run of %i ms end sooner, at no more reads than the growing schedule',
    (meanMs) => {
      const growing = walk(meanMs, 0.1);
      const learned = walk(meanMs, 0.1, history(meanMs, 0.1));
      expect(learned.meanReads).toBeLessThanOrEqual(growing.meanReads);
      expect(learned.p99).toBeLessThan(growing.p99);
      if (meanMs <= 120_000) {
        expect(learned.p50).toBeLessThanOrEqual(2_000);
        expect(learned.p99).toBeLessThanOrEqual(4_000);
      }
      // A history a little off (mean 4 % short, spread 40 % too narrow): the tail pays, yet still
      // ends well before the growing schedule's.
      const off = walk(meanMs, 0.1, history(0.96 * meanMs, 0.06));
      expect(off.p99).toBeLessThan(growing.p99 / 2);
      // A send not answered active is first read at POLL_MIN_INTERVAL: one read more, no later.
      const unseen = walk(meanMs, 0.1, history(meanMs, 0.1), false);
      expect(unseen.meanReads).toBeLessThanOrEqual(learned.meanReads + 1);
      expect(unseen.p99).toBeLessThanOrEqual(learned.p99);
    },
  );

  it('keeps the growing schedule without enough history, for irregular runs, or when off', () => {
    const growing = readTimes(45_000, LEARN);
    expect(readTimes(45_000, LEARN, history(30_000, 0.1, 1))).toEqual(growing);
    expect(readTimes(45_000, LEARN, history(30_000, 0.9))).toEqual(growing);
    expect(readTimes(45_000, READ_DEFAULTS, history(30_000, 0.1))).toEqual(growing);
    expect(planReads(history(30_000, 0.9), LEARN)).toBeUndefined();
  });

  it('falls back to growing waits past the expected end, within POLL_MIN/MAX_INTERVAL', () => {
    const plan = planReads(history(30_000, 0.1), LEARN);
    const times = readTimes(10 * 60_000, LEARN, history(30_000, 0.1));
    const waits = times.slice(1).map((t, i) => t - (times[i] as number));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(LEARN.pollMinIntervalMs);
    expect(Math.max(...waits)).toBe(LEARN.pollMaxIntervalMs);
    const late = waits.filter((_, i) => (times[i] as number) >= (plan?.windowEndMs ?? 0));
    // Each wait past the window grows by half or doubles the one before, up to POLL_MAX_INTERVAL.
    for (let i = 1; i < late.length; i++) {
      const before = late[i - 1] as number;
      const max = LEARN.pollMaxIntervalMs;
      expect(late[i]).toBeGreaterThanOrEqual(Math.min(max, Math.floor(1.5 * before)));
      expect(late[i]).toBeLessThanOrEqual(Math.min(max, 2 * before));
    }
    // Such an outlier costs the window's reads on top of what the growing schedule spends.
    const windowReads = times.filter((t) => t >= (plan?.windowStartMs ?? 0) && t < 35_000);
    expect(times.length).toBeLessThanOrEqual(
      readTimes(10 * 60_000, READ_DEFAULTS).length + windowReads.length,
    );
  });

  it("reports a run's length as the middle of its last active and its terminal read", () => {
    const seen = { kind: 'job' as const, job: { id: 'j', status: 'completed', prLink: null } };
    const record = sentRecord(1_000, { activeAt: SENT_AT + 29_000 });
    const action = actionForRead(record, seen, SENT_AT + 30_000, LEARN);
    expect(action).toMatchObject({ kind: 'finish', run: { runMs: 29_500, varMs2: 83_333 } });
    // A wide gap (the poller was away) says too little; with learning off nothing is reported.
    const away = sentRecord(1_000, { activeAt: SENT_AT + 5_000 });
    expect(actionForRead(away, seen, SENT_AT + 30_000, LEARN)).not.toHaveProperty('run');
    expect(actionForRead(record, seen, SENT_AT + 30_000, READ_DEFAULTS)).not.toHaveProperty('run');
  });

  it('stores when a read saw the run active', () => {
    const seen = { kind: 'job' as const, job: { id: 'j', status: 'active', prLink: null } };
    const action = actionForRead(sentRecord(500), seen, SENT_AT + 500, LEARN);
    expect(action).toMatchObject({ kind: 'reschedule', fields: { activeAt: SENT_AT + 500 } });
  });

  it('tells the history once when a run goes on past its window, as a long run', () => {
    const seen = { kind: 'job' as const, job: { id: 'j', status: 'active', prLink: null } };
    // Runs of 30 s ± 1.5 s: the window ends near 33.5 s.
    const runs = history(30_000, 0.05, 20);
    const windowEndMs = planReads(runs, LEARN)?.windowEndMs ?? 0;
    expect(windowEndMs).toBeGreaterThan(32_000);
    expect(windowEndMs).toBeLessThan(35_000);
    const read = (activeMs: number, atMs: number) =>
      actionForRead(
        sentRecord(1_000, { activeAt: SENT_AT + activeMs }),
        seen,
        SENT_AT + atMs,
        LEARN,
        runs,
      );
    // The first read past the window that sees it active: a run at least that long, told with
    // the history's own spread (it weighs as a run seen roughly, not precisely).
    const first = read(windowEndMs - 500, windowEndMs + 200);
    expect(first).toMatchObject({
      kind: 'reschedule',
      overran: { atMs: SENT_AT + windowEndMs + 200, varMs2: runs.varMs2, going: true },
    });
    const overran = first.kind === 'reschedule' ? first.overran : undefined;
    expect(overran?.runMs).toBeGreaterThanOrEqual(windowEndMs + 200);
    // Far past everything the history knows: at least as long as it has gone on.
    expect(read(windowEndMs - 500, 120_000)).toMatchObject({ overran: { runMs: 120_000 } });
    // The record keeps that it was told, for this send: its window moves on with the history.
    expect(first).toMatchObject({ fields: { overran: SENT_AT } });
    const told = sentRecord(1_000, { activeAt: SENT_AT + windowEndMs - 500, overran: SENT_AT });
    expect(actionForRead(told, seen, SENT_AT + windowEndMs + 200, LEARN, runs)).not.toHaveProperty(
      'overran',
    );
    // Only once: the reads after it, and those within the window, tell nothing.
    expect(read(windowEndMs + 200, windowEndMs + 2_000)).not.toHaveProperty('overran');
    expect(read(25_000, 30_000)).not.toHaveProperty('overran');
    // Nor without learning, or without a history that shapes the reads.
    const off = actionForRead(
      sentRecord(1_000, { activeAt: SENT_AT + windowEndMs - 500 }),
      seen,
      SENT_AT + windowEndMs + 200,
      READ_DEFAULTS,
      runs,
    );
    expect(off).not.toHaveProperty('overran');
    const young = actionForRead(
      sentRecord(1_000, { activeAt: SENT_AT + windowEndMs - 500 }),
      seen,
      SENT_AT + windowEndMs + 200,
      LEARN,
      history(30_000, 0.05, 1),
    );
    expect(young).not.toHaveProperty('overran');
  });

  it('leaves short runs to the growing schedule, which reads them as densely as a window would', () => {
    // Runs of 2 to 5 s, read from 250 ms: the growing schedule waits 1 s at their mean, and a
    // window spending no more reads would wait about as long.
    const bounds = { pollMinIntervalMs: 250, pollMaxIntervalMs: 5_000 };
    expect(planReads({ runs: 50, meanMs: 3_500, varMs2: 860 ** 2 }, bounds)).toBeUndefined();
    // So with a spread of a fifth of the mean, well within LEARN_MAX_CV; runs within ±10 % make
    // a window narrow enough to read them more densely.
    expect(planReads(history(3_500, 0.35, 50), bounds)).toBeUndefined();
    expect(planReads(history(3_500, 0.1, 50), bounds)).toBeDefined();
    // Runs of minutes, read from 500 ms: the window is far denser than the growing waits there.
    const plan = planReads(history(90_000, 0.1, 50), LEARN);
    expect(plan?.stepMs).toBeLessThan(4_000);
    // And runs of hours, whose growing waits stopped growing at POLL_MAX_INTERVAL: still a window.
    expect(planReads(history(3 * 3_600_000, 0.1, 50), LEARN)).toBeDefined();
  });
});
