import { describe, expect, it } from 'vitest';
import { PACE_FLOOR, Schedule } from '../../bench/schedule.js';

/** The bench's time budget: which repeats it lets run, before and after the calibration. */
describe('the bench schedule', () => {
  const minimums = new Map([
    ['calibrating', 30_000],
    ['first', 100_000],
    ['second', 200_000],
  ]);
  const schedule = (budgetMs: number) =>
    new Schedule(minimums, { budgetMs, calibrating: 'calibrating' });

  it('keeps the minimum of every scenario not started yet until a pace is known', () => {
    const s = schedule(320_000);
    s.enter('calibrating');
    s.enter('first');
    // 200 s kept for `second`: a 130 s repeat would leave 10 s too few.
    expect(s.allows(130_000)).toBe(false);
    expect(s.allows(110_000)).toBe(true);
    expect(s.pace).toBe(1);
  });

  it("scales what it keeps by the calibrating scenario's pace, never below the floor", () => {
    const s = schedule(320_000);
    s.enter('calibrating');
    s.calibrate('calibrating', 3_000);
    expect(s.pace).toBe(PACE_FLOOR);
    s.enter('first');
    // 200 s × 0.6 = 120 s kept: a 190 s repeat fits, a 210 s one does not.
    expect(s.allows(190_000)).toBe(true);
    expect(s.allows(210_000)).toBe(false);
  });

  it('takes a slow calibration as a pace of at most 1', () => {
    const s = schedule(320_000);
    s.enter('calibrating');
    s.calibrate('calibrating', 90_000);
    expect(s.pace).toBe(1);
    s.enter('first');
    expect(s.allows(130_000)).toBe(false);
  });

  it("lets the calibrating scenario repeat up to the deadline, whatever the others' minimums", () => {
    const s = schedule(100_000);
    s.enter('calibrating');
    // 300 s of minimums are still to come, yet its minimum covers its repeats.
    expect(s.allows(60_000)).toBe(true);
    expect(s.allows(110_000)).toBe(false);
    s.enter('first');
    expect(s.allows(60_000)).toBe(false);
  });
});
