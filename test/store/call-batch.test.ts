import { describe, expect, it } from 'vitest';
import { CallBatch, failureOf, ItemFailure } from '../../src/store/call-batch.js';

/** A batcher whose `run` records each batch it gets and answers `answer(item)` per item. */
function recording<T, R>(answer: (items: readonly T[]) => Promise<readonly R[]>, maxBatch = 10) {
  const batches: T[][] = [];
  const batch = new CallBatch<T, R>((items) => {
    batches.push([...items]);
    return answer(items);
  }, maxBatch);
  return { batch, batches };
}

describe('CallBatch', () => {
  it('makes the items added in one turn of the event loop one call, answering each in order', async () => {
    const { batch, batches } = recording((items: readonly number[]) =>
      Promise.resolve(items.map((n) => n * 10)),
    );
    const first = await Promise.all([batch.add(1), batch.add(2), batch.add(3)]);
    const second = await batch.add(4);
    expect(first).toEqual([10, 20, 30]);
    expect(second).toBe(40);
    expect(batches).toEqual([[1, 2, 3], [4]]);
  });

  it('calls at once when maxBatch items wait, and the rest at the end of the turn', async () => {
    const { batch, batches } = recording(
      (items: readonly number[]) => Promise.resolve(items.map(String)),
      2,
    );
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => batch.add(n)));
    expect(answers).toEqual(['1', '2', '3', '4', '5']);
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
  });

  it('fails every item of a failed call, thrown or rejected, and goes on with the next', async () => {
    let calls = 0;
    const batch = new CallBatch<number, number>((items) => {
      calls += 1;
      if (calls === 1) throw new Error('thrown');
      if (calls === 2) return Promise.reject(new Error('rejected'));
      return Promise.resolve(items);
    }, 10);
    const thrown = await Promise.allSettled([batch.add(1), batch.add(2)]);
    const rejected = await Promise.allSettled([batch.add(3)]);
    expect(thrown.map((r) => r.status === 'rejected' && String(r.reason))).toEqual([
      'Error: thrown',
      'Error: thrown',
    ]);
    expect(rejected.map((r) => r.status === 'rejected' && String(r.reason))).toEqual([
      'Error: rejected',
    ]);
    expect(await batch.add(4)).toBe(4);
  });

  it('fails alone an item answered with an ItemFailure; the others of its call stand', async () => {
    const { batch } = recording((items: readonly number[]) =>
      Promise.all(
        items.map((n) =>
          n % 2 === 0
            ? failureOf(Promise.reject(new Error(`even ${n}`)))
            : failureOf(Promise.resolve(n)),
        ),
      ),
    );
    const answers = await Promise.allSettled([1, 2, 3, 4].map((n) => batch.add(n)));
    expect(answers.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason)))).toEqual([
      1,
      'Error: even 2',
      3,
      'Error: even 4',
    ]);
    expect(await failureOf(Promise.reject(new Error('x')))).toBeInstanceOf(ItemFailure);
  });

  it('fails the items a call left unanswered', async () => {
    const { batch } = recording((items: readonly number[]) => Promise.resolve(items.slice(0, 1)));
    const [answered, unanswered] = await Promise.allSettled([batch.add(1), batch.add(2)]);
    expect(answered).toEqual({ status: 'fulfilled', value: 1 });
    expect(unanswered.status === 'rejected' && String(unanswered.reason)).toMatch(
      /answered 1 of 2/,
    );
  });
});
