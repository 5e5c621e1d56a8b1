import { describe, expect, it } from 'vitest';
import { createProducer, IdempotencyConflictError } from '../../src/producer/index.js';
import { shardOf } from '../../src/redis/keys.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

const SHARDS = 4;

/** A project of another shard than `projectId`'s. */
function otherShard(projectId: string): string {
  for (let i = 0; ; i++)
    if (shardOf(`other-${i}`, SHARDS) !== shardOf(projectId, SHARDS)) return `other-${i}`;
}

/** A producer of `shards` shards, and what a batch it sends is refused: [index, after]. */
function useRefusals(label: string, shards: number) {
  const ns = useNamespace(label, { shards });
  const producer = useOpened('producer', () =>
    createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      eventsStream: ns().eventsStream,
      shards,
      durability: { mode: 'none' },
    }),
  );
  const refusedOf = async (batch: Parameters<ReturnType<typeof producer>['sendMany']>[0]) => {
    const err = await producer()
      .sendMany(batch)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyConflictError);
    return (err as IdempotencyConflictError).conflicts.map((c) => [c.index, c.after ?? null]);
  };
  return { producer, refusedOf };
}

/**
 * A creation refused for its key takes the follow-ups chained to it in the same batch along
 * (a conflict carrying `after`), whichever REGISTER call holds them, and when its key's claim
 * across shards was refused before any transaction.
 */
describe.each([1, SHARDS])('follow-ups chained to a refused creation (%i shards)', (shards) => {
  const { producer, refusedOf } = useRefusals(`chained-chunks-${shards}`, shards);

  it('refuses one in a later REGISTER call of the batch (another chunk)', async () => {
    const old = await producer().create({ projectId: 'p1', prompt: 'v1', key: 'kc' });
    const fillers = Array.from({ length: 1_000 }, (_, i) => ({
      projectId: 'p1',
      jobId: `j${i}`,
      prompt: 'x',
    }));
    const refused = await refusedOf([
      { projectId: 'p1', prompt: 'v2', key: 'kc', create: true },
      ...fillers,
      { projectId: 'p1', after: 'kc', prompt: 'chained' },
    ]);
    expect(refused).toEqual([
      [0, null],
      [1_001, old.dispatchId],
    ]);
  }, 30_000);
});

describe('a follow-up chained to a creation whose key claim was refused', () => {
  const { producer, refusedOf } = useRefusals('chained-claims', SHARDS);

  it('is refused with it, before any transaction', async () => {
    const old = await producer().create({ projectId: 'p1', prompt: 'v1', key: 'kc' });
    const other = otherShard('p1');
    const refused = await refusedOf([
      { projectId: other, prompt: 'v2', key: 'kc', create: true },
      { projectId: other, after: 'kc', prompt: 'chained' },
      { projectId: 'p1', jobId: 'j', prompt: 'plain' },
    ]);
    expect(refused).toEqual([
      [0, null],
      [1, old.dispatchId],
    ]);
  }, 30_000);
});
