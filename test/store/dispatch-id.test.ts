import { describe, expect, it } from 'vitest';
import { newDispatchId, randomDispatchId } from '../../src/store/register.js';

describe('dispatch ids', () => {
  it('draws 22 letters and digits, a letter first, none twice in 200,000', () => {
    const ids = Array.from({ length: 200_000 }, () => randomDispatchId());
    expect(ids.every((id) => /^[A-Za-z][A-Za-z0-9]{21}$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(newDispatchId(undefined)).toMatch(/^[A-Za-z][A-Za-z0-9]{21}$/);
  });

  it('uses every character about as often: no modulo bias', () => {
    const counts = new Map<string, number>();
    const n = 20_000;
    for (let i = 0; i < n; i++) {
      for (const c of randomDispatchId().slice(1)) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    // 420,000 draws over 62 characters: 6,774 each expected, a standard deviation of about 81.
    // A byte taken modulo 62 without skipping would give the first 8 characters about 8,200 each
    // (5 bytes of 256 map to each) and the rest about 6,560, outside these bounds.
    expect(counts.size).toBe(62);
    for (const count of counts.values()) expect(Math.abs(count - (n * 21) / 62)).toBeLessThan(420);
  });

  it('derives the same id from the same idempotency key, as before', () => {
    expect(newDispatchId('order-42')).toBe(newDispatchId('order-42'));
    expect(newDispatchId('order-42')).toMatch(/^k-[0-9a-f]{40}$/);
  });
});
