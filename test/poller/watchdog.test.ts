import { describe, expect, it } from 'vitest';
import { tickWorkerWedged } from '../../src/poller/role.js';

describe("the poller's watchdog of its tick Worker", () => {
  const stalledMs = 30_000;
  const now = 1_000_000;
  const pending = (lastAt: number | undefined) => ({ pending: true, lastAt });

  it('restarts a Worker when no tick of the fleet started for the whole span, one pending', () => {
    expect(tickWorkerWedged(now, now - 30_000, pending(now - 30_000), stalledMs)).toBe(true);
    expect(tickWorkerWedged(now, now - 90_000, pending(now - 45_000), stalledMs)).toBe(true);
    // A master that came back empty kept no finished tick to go by.
    expect(tickWorkerWedged(now, now - 30_000, pending(undefined), stalledMs)).toBe(true);
  });

  it('leaves alone a Worker that ticked lately, or whose fleet takes the ticks', () => {
    expect(tickWorkerWedged(now, now - 29_999, pending(now - 60_000), stalledMs)).toBe(false);
    expect(tickWorkerWedged(now, now - 120_000, pending(now - 2_000), stalledMs)).toBe(false);
  });

  it('leaves alone a queue with no tick pending (the upsert adds one) or paused', () => {
    const none = { pending: false, lastAt: now - 120_000 };
    expect(tickWorkerWedged(now, now - 120_000, none, stalledMs)).toBe(false);
  });
});
