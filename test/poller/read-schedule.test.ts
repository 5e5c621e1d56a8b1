import { describe, expect, it } from 'vitest';
import { firstRead } from '../../src/dispatch/read-schedule.js';
import { READ_DEFAULTS as DEFAULTS, readTimes } from '../support/read-walk.js';

/** The growing read schedule (no run history), walked through actionForRead (see read-walk). */

describe('the read schedule', () => {
  it('costs at most 15 GETs for a 5-minute run with the default settings', () => {
    expect(readTimes(5 * 60_000, DEFAULTS).length).toBeLessThanOrEqual(15);
  });

  it('reads a run that ends in its first 20 POLL_MIN_INTERVALs within 4 of them', () => {
    for (const min of [250, 500, 1_000]) {
      const s = { ...DEFAULTS, pollMinIntervalMs: min };
      for (let runMs = min; runMs <= 20 * min; runMs += min / 4) {
        const times = readTimes(runMs, s);
        expect(times.at(-1)! - runMs).toBeLessThanOrEqual(4 * min);
      }
    }
  });

  it('still reads densely in the first seconds, and waits at most POLL_MAX_INTERVAL later', () => {
    const times = readTimes(10 * 60_000, DEFAULTS);
    expect(times.slice(0, 4)).toEqual([500, 1_250, 2_375, 4_063]);
    const waits = times.slice(1).map((t, i) => t - (times[i] as number));
    expect(Math.max(...waits)).toBe(DEFAULTS.pollMaxIntervalMs);
  });

  it("skips the first read of a run the send's answer shows active: the others fall as before", () => {
    for (const min of [250, 500, 1_000]) {
      const s = { ...DEFAULTS, pollMinIntervalMs: min };
      for (const runMs of [min / 2, 3 * min, 30 * min, 10 * 60_000]) {
        const unseen = readTimes(runMs, s);
        const seen = readTimes(runMs, s, undefined, firstRead(true, s));
        expect(seen).toEqual(unseen.length > 1 ? unseen.slice(1) : [unseen[0]! + 1.5 * min]);
      }
    }
  });

  it('skips no read where the skipped one would put the first further than POLL_MAX_INTERVAL from the send', () => {
    for (const max of [1_000, 1_500, 2_499]) {
      const s = { ...DEFAULTS, pollMinIntervalMs: 1_000, pollMaxIntervalMs: max };
      expect(firstRead(true, s)).toEqual({ atMs: 1_000, waitMs: 1_000 });
    }
    const s = { ...DEFAULTS, pollMinIntervalMs: 1_000, pollMaxIntervalMs: 2_500 };
    expect(firstRead(true, s)).toEqual({ atMs: 2_500, waitMs: 1_500 });
    expect(firstRead(false, s)).toEqual({ atMs: 1_000, waitMs: 1_000 });
  });
});
