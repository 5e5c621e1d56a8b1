import { describe, expect, it } from 'vitest';
import { ConcurrencyController } from '../../src/consumer/worker.js';

describe('ConcurrencyController (AIMD)', () => {
  function controller(max = 16) {
    let now = 0;
    const changes: [number, string][] = [];
    const c = new ConcurrencyController({
      max,
      slowMs: 1_000,
      cooldownMs: 500,
      now: () => now,
      onChange: (l, r) => changes.push([l, r]),
    });
    return { c, changes, advance: (ms: number) => (now += ms) };
  }

  it('halves on a 429 and on a slow answer, at most once per cooldown', () => {
    const { c, changes, advance } = controller();
    c.onRateLimited();
    c.onRateLimited();
    expect(c.limit).toBe(8);
    advance(600);
    c.onAnswer(5_000);
    expect(c.limit).toBe(4);
    expect(changes).toEqual([
      [8, 'rate_limited'],
      [4, 'slow'],
    ]);
  });

  it('grows by one after a limit worth of healthy answers, up to the maximum, never below 1', () => {
    const { c, advance } = controller(4);
    for (let i = 0; i < 3; i++) {
      c.onRateLimited();
      advance(600);
    }
    expect(c.limit).toBe(1);
    c.onAnswer(10);
    expect(c.limit).toBe(2);
    for (let i = 0; i < 2 + 3 + 10; i++) c.onAnswer(10);
    expect(c.limit).toBe(4);
  });
});
