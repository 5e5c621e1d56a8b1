import { describe, expect, it } from 'vitest';
import {
  JITTER_MAX_MS,
  JITTER_SHARE,
  earlierBy,
  jitteredMs,
  jitteredUntil,
  jitteredWithin,
} from '../../src/time/jitter.js';

/** Wake-ups of parked follow-ups and scheduled reads: spread, never early, bounded. */
describe('wake-up jitter', () => {
  it('spreads a backlog parked together over a small share of its wait, never earlier', () => {
    const now = 1_000_000;
    const woken = Array.from({ length: 2_000 }, () => jitteredUntil(now + 36_000, now));
    expect(Math.min(...woken)).toBeGreaterThanOrEqual(now + 36_000);
    expect(Math.max(...woken)).toBeLessThanOrEqual(now + 36_000 + 36_000 * JITTER_SHARE);
    // Not one instant: the 2,000 wake-ups fall on hundreds of distinct milliseconds.
    expect(new Set(woken).size).toBeGreaterThan(500);
  });

  it('bounds the spread by its cap and by JITTER_MAX_MS', () => {
    expect(jitteredMs(10_000, 500, () => 1)).toBe(10_500);
    expect(jitteredMs(10 * 60_000, undefined, () => 1)).toBe(10 * 60_000 + JITTER_MAX_MS);
    expect(jitteredMs(2_000, undefined, () => 1)).toBe(2_000 + 2_000 * JITTER_SHARE);
    expect(jitteredMs(2_000, undefined, () => 0)).toBe(2_000);
    expect(jitteredMs(0)).toBe(0);
    // A wake-up already due is not moved.
    expect(jitteredUntil(5, 10, undefined, () => 1)).toBe(5);
  });

  it('moves a wake-up that must not be late only earlier, within its spread', () => {
    expect(earlierBy(10_000, 200, () => 1)).toBe(9_800);
    expect(earlierBy(10_000, 200, () => 0)).toBe(10_000);
    const woken = Array.from({ length: 1_000 }, () => earlierBy(10_000, 200));
    expect(Math.min(...woken)).toBeGreaterThanOrEqual(9_800);
    expect(Math.max(...woken)).toBeLessThanOrEqual(10_000);
  });

  it('spreads reads at their upper bound below it, never past it', () => {
    // A read a minute away, at POLL_MAX_INTERVAL: moved earlier, by at most its cap.
    expect(jitteredWithin(60_000, 60_000, 500, () => 1)).toBe(59_500);
    expect(jitteredWithin(60_000, 60_000, 500, () => 0)).toBe(60_000);
    // Below the bound with room to spare: later, as jitteredMs.
    expect(jitteredWithin(4_000, 60_000, 500, () => 1)).toBe(4_400);
    // A wait asked past the bound is taken as the bound.
    expect(jitteredWithin(90_000, 60_000, 500, () => 0)).toBe(60_000);
    const reads = Array.from({ length: 1_000 }, () => jitteredWithin(60_000, 60_000, 500));
    expect(Math.max(...reads)).toBeLessThanOrEqual(60_000);
    expect(Math.min(...reads)).toBeGreaterThanOrEqual(59_500);
    expect(new Set(reads).size).toBeGreaterThan(200);
  });
});
