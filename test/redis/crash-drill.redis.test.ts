import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createNamespace, type Namespace } from '../support/namespace.js';
import { useSimulator } from '../support/simulator.js';
import { describeCrash, runAofDrill } from '../faults/support/aof-drill.js';
import { expectDurableDrill } from '../faults/support/crash-case.js';
import { DRILL_SIMULATOR } from '../faults/support/traffic.js';

/**
 * The short form of the fault suite's durability drill (test/faults/durability.redis.test.ts):
 * Valkey SIGKILLed under load, its AOF cut back to what was surely on disk, restarted.
 */
describe('a Valkey crash with the AOF cut back to what was fsynced', () => {
  const simulator = useSimulator(DRILL_SIMULATOR);
  let ns: Namespace;
  beforeEach(() => {
    ns = createNamespace('crash');
    simulator().reset();
  });
  afterEach(() => ns.cleanup());
  const sizes = { batch: 4, batchIntervalMs: 20, loadMs: [800, 1_500] as const };

  it('REDIS_DURABILITY=fsync, a quarter of API requests 5xx: 3 crashes, nothing accepted lost, no prompt sent twice, one event each, none left in doubt', async () => {
    const result = await runAofDrill(ns, simulator(), {
      ...sizes,
      mode: 'fsync',
      apiErrorRate: 0.25,
      crashes: 3,
      settleMs: 10_000,
      finalSettleMs: 30_000,
    });
    console.log(result.crashes.map(describeCrash).join('\n'));
    expect(result.crashes).toHaveLength(3);
    expectDurableDrill(result);
  }, 180_000);

  it('REDIS_DURABILITY=none: the same cut loses accepted follow-ups or sends prompts twice', async () => {
    const result = await runAofDrill(ns, simulator(), {
      ...sizes,
      mode: 'none',
      crashes: 1,
      settleMs: 5_000,
      finalSettleMs: 10_000,
    });
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
