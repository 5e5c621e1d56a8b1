import { describe, expect, it } from 'vitest';
import { describeCrash, useAofDrill } from '../faults/support/aof-drill.js';
import { expectDurableDrill } from '../faults/support/crash-case.js';

/**
 * The short form of the fault suite's durability drill (test/faults/durability.redis.test.ts):
 * Valkey SIGKILLed under load, its AOF cut back to what was surely on disk, restarted.
 */
describe('a Valkey crash with the AOF cut back to what was fsynced', () => {
  const drill = useAofDrill('crash', { batch: 4, batchIntervalMs: 20, loadMs: [800, 1_500] });

  it('REDIS_DURABILITY=fsync, a quarter of API requests 5xx: 3 crashes, nothing accepted lost, no prompt sent twice, one event each, none left in doubt', async () => {
    // The final wait outlasts a lane's recheck (BLOCKED_RECHECK_MS, 30 s), by which a lane's
    // wake-up lost to the cut (or not sent, when WAITAOF did not vouch for the release) is made
    // up for, and a follow-up's retries after 5xx (at most 15 s, see AOF_DRILL_ATTEMPTS).
    // The fault suite's drill waits 120 s.
    const result = await drill('fsync', 3, 45_000);
    console.log(result.crashes.map(describeCrash).join('\n'));
    expect(result.crashes).toHaveLength(3);
    expectDurableDrill(result);
  }, 180_000);

  it('REDIS_DURABILITY=none: the same cut loses accepted follow-ups or sends prompts twice', async () => {
    const result = await drill('none', 1, 10_000);
    console.log(result.crashes.map(describeCrash).join('\n'));
    expect(result.waitaofReplies).toBe(0);
    const harm = result.crashes.reduce(
      (sum, c) => sum + c.books.lost.length + c.books.duplicateDeliveries.length + c.notOneEvent,
      0,
    );
    expect(result.crashes[0]?.cutBytes).toBeGreaterThan(0);
    expect(harm).toBeGreaterThan(0);
  }, 90_000);
});
