import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createProducer, IdempotencyConflictError } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';
import { laneIds, openDispatches } from '../support/where-is.js';

/**
 * One REGISTER registers a whole batch (register-n.lua): a key repeated within the batch is
 * answered as if each follow-up had been sent alone, in order, and a batch of any size fits.
 */
describe('sendMany: one REGISTER per batch', () => {
  const ns = useNamespace('batches');
  const producer = useOpened('producer', () =>
    createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix }),
  );
  const queue = useOpened(
    'queue',
    () =>
      new Queue(QUEUE_NAMES.dispatch, { connection: ns().redis.duplicate(), prefix: ns().prefix }),
  );

  it('answers a key repeated within the batch: new, then deduplicated or a conflict', async () => {
    const keyed = { projectId: 'p', jobId: 'j', prompt: 'a', key: 'k-1' };
    const error = (await producer()
      .sendMany([
        keyed,
        { projectId: 'p', jobId: 'j', prompt: 'plain' },
        keyed,
        { ...keyed, prompt: 'b' },
      ])
      .catch((e: unknown) => e)) as IdempotencyConflictError;
    expect(error).toBeInstanceOf(IdempotencyConflictError);
    const [first, plain, again] = error.results;
    expect(error.results).toEqual([
      { dispatchId: expect.any(String), deduplicated: false },
      { dispatchId: expect.any(String), deduplicated: false },
      { dispatchId: first?.dispatchId, deduplicated: true },
      null,
    ]);
    expect(again?.dispatchId).toBe(first?.dispatchId);
    expect(error.conflicts).toEqual([{ index: 3, key: 'k-1', dispatchId: first?.dispatchId }]);
    expect(await laneIds(ns().redis, ns().prefix, 'p', 'j')).toEqual([
      first?.dispatchId,
      plain?.dispatchId,
    ]);
    expect((await openDispatches(ns().redis, ns().prefix)).count).toBe(2);
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 2 });
  });

  it('registers a batch of 2,500, past the script’s thousand-key steps, beside existing records', async () => {
    // The batch's first follow-up, sent before it.
    const before = await producer().send({ projectId: 'p0', jobId: 'j0', prompt: '#0', key: 'k0' });
    const batch = Array.from({ length: 2_500 }, (_, i) => ({
      projectId: `p${i % 10}`,
      jobId: `j${i}`,
      prompt: `#${i}`,
      ...(i % 1_000 === 0 ? { key: `k${i}` } : {}),
    }));
    const results = await producer().sendMany(batch);
    expect(results.filter((r) => r.deduplicated)).toEqual([
      { dispatchId: before.dispatchId, deduplicated: true },
    ]);
    expect(new Set(results.map((r) => r.dispatchId)).size).toBe(2_500);
    const keys = keysFor(ns().prefix);
    expect((await openDispatches(ns().redis, ns().prefix)).count).toBe(2_500);
    expect(await ns().redis.get(keys.prompt(results[1_999]?.dispatchId ?? ''))).toBe('#1999');
    expect(await laneIds(ns().redis, ns().prefix, 'p9', 'j2499')).toEqual([
      results[2_499]?.dispatchId,
    ]);
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 2_500 });
  });

  it('registers a batch of 15,000 in calls of a thousand, answering a key repeated across them', async () => {
    const batch = Array.from({ length: 15_000 }, (_, i) => ({
      projectId: `p${i % 10}`,
      jobId: `j${i}`,
      prompt: `#${i}`,
    }));
    // The same key in the first call and in the second: the same content, then another.
    batch[1_500] = { ...(batch[0] as (typeof batch)[0]), key: 'across' } as (typeof batch)[0];
    batch[0] = { ...(batch[0] as (typeof batch)[0]), key: 'across' } as (typeof batch)[0];
    batch[14_999] = { ...(batch[0] as (typeof batch)[0]), prompt: 'other' } as (typeof batch)[0];
    const error = (await producer()
      .sendMany(batch)
      .catch((e: unknown) => e)) as IdempotencyConflictError;
    expect(error).toBeInstanceOf(IdempotencyConflictError);
    const first = error.results[0];
    expect(error.results[1_500]).toEqual({ dispatchId: first?.dispatchId, deduplicated: true });
    expect(error.conflicts).toEqual([
      { index: 14_999, key: 'across', dispatchId: first?.dispatchId },
    ]);
    const keys = keysFor(ns().prefix);
    expect((await openDispatches(ns().redis, ns().prefix)).count).toBe(14_998);
    expect(await ns().redis.get(keys.prompt(error.results[14_998]?.dispatchId ?? ''))).toBe(
      '#14998',
    );
    expect(await queue().getJobCounts('wait')).toEqual({ wait: 14_998 });
  });
});
