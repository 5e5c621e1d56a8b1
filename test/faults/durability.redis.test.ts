import { describe, expect, it } from 'vitest';
import {
  AOF_DRILL_ATTEMPTS,
  describeCrash,
  useAofDrill,
  type AofDrillResult,
} from './support/aof-drill.js';
import { expectDurableDrill } from './support/crash-case.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { SCALE } from './support/scale.js';

/** Sums a figure over the crashes of a drill. */
function total(result: AofDrillResult, figure: (c: AofDrillResult['crashes'][number]) => number) {
  return result.crashes.reduce((sum, c) => sum + figure(c), 0);
}

describe('3. Redis crashes with the AOF cut back to what was on disk (REDIS_DURABILITY)', () => {
  const { fsyncCrashes, noneCrashes, batch } = SCALE.durability;
  const drill = useAofDrill('f-durable', { batch, batchIntervalMs: 20, loadMs: [800, 2_000] });

  function record(
    ctx: Parameters<typeof recordFigures>[0],
    mode: string,
    r: AofDrillResult,
    ms: number,
  ) {
    recordFigures(ctx, {
      category: 3,
      scenario: `REDIS_DURABILITY=${mode}: a producer (batches of ${batch}) and 2 workers + 1 poller through a proxy to valkey-server (appendfsync everysec)${mode === 'fsync' ? `, a quarter of API requests answered 5xx (each a re-queue; SEND_ATTEMPTS ${AOF_DRILL_ATTEMPTS})` : ''}; each crash SIGKILLs Valkey under load and cuts its AOF to ${mode === 'fsync' ? 'its size when the last WAITAOF answered' : 'its size 1 s before the kill'}`,
      tried: total(r, (c) => c.accepted),
      faults: `${r.crashes.length} SIGKILLs of Valkey with the AOF cut (${total(r, (c) => c.cutBytes)} bytes in all)`,
      lost: total(r, (c) => c.books.lost.length),
      duplicated: total(
        r,
        (c) => c.books.duplicateDeliveries.length + c.books.duplicateEvents.length,
      ),
      leaked: 0,
      notes: [...r.crashes.map(describeCrash), `WAITAOF replies ${r.waitaofReplies}`],
      durationMs: ms,
    });
  }

  it(`fsync, a quarter of API requests 5xx: ${fsyncCrashes} crashes, 0 accepted follow-ups lost, 0 prompts sent twice, one event each, none left in doubt`, async (ctx) => {
    const watch = stopwatch();
    const result = await drill('fsync', fsyncCrashes, 120_000);
    record(ctx, 'fsync', result, watch());
    expect(result.crashes).toHaveLength(fsyncCrashes);
    expectDurableDrill(result);
  });

  it(`none: ${noneCrashes} crashes with the same cut lose accepted follow-ups or send prompts twice`, async (ctx) => {
    const watch = stopwatch();
    const result = await drill('none', noneCrashes, 20_000);
    record(ctx, 'none', result, watch());
    expect(result.waitaofReplies).toBe(0);
    for (const c of result.crashes) expect(c.cutBytes).toBeGreaterThan(0);
    const harm = total(
      result,
      (c) => c.books.lost.length + c.books.duplicateDeliveries.length + c.notOneEvent,
    );
    expect(harm).toBeGreaterThan(0);
  });
});
