import { describe, expect, it } from 'vitest';
import { repeatedPairs } from '../../bench/stats.js';

/** Ours and the baseline measured in pairs: alternated, as many runs each, medians apart. */
describe('repeatedPairs', () => {
  it('alternates the sides and gives each the run of its median figure', async () => {
    const order: string[] = [];
    const side = (name: string, figures: number[]) => ({
      once: (run: number) => {
        order.push(`${name}${run}`);
        return Promise.resolve({ run, figure: figures[run] ?? 0 });
      },
      figure: (r: { figure: number }) => r.figure,
    });
    const { ours, baseline } = await repeatedPairs(
      3,
      side('o', [30, 10, 20]),
      side('b', [5, 7, 6]),
    );
    expect(order).toEqual(['o0', 'b0', 'o1', 'b1', 'o2', 'b2']);
    expect(ours).toMatchObject({ values: [30, 10, 20], median: 20, typical: { run: 2 } });
    expect(baseline).toMatchObject({ values: [5, 7, 6], median: 6, typical: { run: 2 } });
  });

  it('stops both sides together when the time budget allows no further pair', async () => {
    const side = { once: (run: number) => Promise.resolve(run), figure: (r: number) => r };
    let asked = 0;
    const { ours, baseline } = await repeatedPairs(3, side, side, () => ++asked < 2);
    expect(ours.values).toEqual([0, 1]);
    expect(baseline.values).toEqual([0, 1]);
  });
});
