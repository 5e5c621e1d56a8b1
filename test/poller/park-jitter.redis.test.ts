import { describe, expect, it } from 'vitest';
import { readLane, type Batch } from '../../src/poller/lane.js';
import { keysFor } from '../../src/redis/keys.js';
import { JITTER_SHARE } from '../../src/time/jitter.js';
import { sentRecord } from '../support/read-walk.js';
import { pollerResources, useService } from '../support/service.js';

/**
 * A project whose status reads are parked (its GETs answered 429) has its due follow-ups put back
 * to the park's end: spread over a small share of the park, not all at its last instant.
 */
describe("a parked project's status reads", () => {
  const { simulator, ns } = useService('park-jitter');

  it('come back spread over a small share of the park, never before it ends', async () => {
    const ctx = pollerResources(ns(), simulator());
    try {
      const { tracked } = keysFor(ns().prefix);
      const ids = Array.from({ length: 300 }, (_, i) => `d${i}`);
      await ns().redis.zadd(tracked, ...ids.flatMap((id) => [0, id]));
      const [seconds] = await ns().redis.time();
      const nowMs = Number(seconds) * 1000;
      const parkMs = 30_000;
      const batch: Batch = {
        ids,
        records: ids.map((dispatchId) => sentRecord(500, { dispatchId })),
        nowMs,
        parkedUntil: new Map([['p', nowMs + parkMs]]),
        runs: new Map(),
        pause: { on: false },
        probing: false,
      };
      let next = 0;
      const take = async () => (next < ids.length ? { batch, index: next++ } : undefined);
      await readLane(ctx, take, { reads: 0, finished: 0 });
      const [after] = await ns().redis.time();
      const afterMs = (Number(after) + 1) * 1000;
      const scores = (await ns().redis.zrange(tracked, 0, -1, 'WITHSCORES'))
        .filter((_, i) => i % 2 === 1)
        .map(Number);
      expect(scores).toHaveLength(ids.length);
      // Counted from Redis's clock when each reschedule ran: between the claim and the end.
      expect(Math.min(...scores)).toBeGreaterThanOrEqual(nowMs + parkMs);
      expect(Math.max(...scores)).toBeLessThanOrEqual(afterMs + parkMs * (1 + JITTER_SHARE));
      expect(new Set(scores).size).toBeGreaterThan(100);
    } finally {
      await ctx.close();
    }
  });
});
