import { describe, expect, it } from 'vitest';
import { IdempotencyConflictError } from '../../src/producer/index.js';
import { keysFor, shardOf } from '../../src/redis/keys.js';
import { newDispatchId } from '../../src/runtime/jobs.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { useSimulator } from '../support/simulator.js';

const SHARDS = 6;

describe('idempotency keys across the shards of a cluster (DISPATCH_SHARDS=6)', () => {
  const simulator = useSimulator();
  const fleet = useClusterFleet(simulator, { masters: 3, shards: SHARDS });
  /** Two projects of different shards. */
  const projects = () => {
    const [a = '', b = ''] = fleet().evenProjects(SHARDS, 'idem');
    expect(shardOf(a, SHARDS)).not.toBe(shardOf(b, SHARDS));
    return [a, b] as const;
  };
  /** The shards that hold a record of `dispatchId`. */
  const holders = async (dispatchId: string) => {
    const shards = fleet().shards();
    const found = await Promise.all(
      shards.map((s) => fleet().redis.exists(keysFor(s.prefix).dispatch(dispatchId))),
    );
    return shards.filter((_, i) => found[i] === 1).map((s) => s.index);
  };

  it("refuses a key already used for a project of another shard, and registers nothing in the second project's shard", async () => {
    const [a, b] = projects();
    const producer = fleet().producer();
    try {
      const first = await producer.send({ projectId: a, jobId: 'j', prompt: 'one', key: 'k-1' });
      expect(first).toEqual({ dispatchId: newDispatchId('k-1'), deduplicated: false });
      // The same content again is deduplicated, as on one shard.
      await expect(
        producer.send({ projectId: a, jobId: 'j', prompt: 'one', key: 'k-1' }),
      ).resolves.toEqual({ dispatchId: first.dispatchId, deduplicated: true });

      const err = await producer
        .send({ projectId: b, jobId: 'j', prompt: 'one', key: 'k-1' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IdempotencyConflictError);
      expect((err as IdempotencyConflictError).conflicts).toEqual([
        { key: 'k-1', dispatchId: first.dispatchId },
      ]);
      expect(await holders(first.dispatchId)).toEqual([shardOf(a, SHARDS)]);
    } finally {
      await producer.close();
    }
  });

  it('in a batch: refuses only the items whose key another shard holds (or an earlier item of another shard), enqueues the rest', async () => {
    const [a, b] = projects();
    const producer = fleet().producer();
    try {
      await producer.send({ projectId: a, jobId: 'j', prompt: 'held', key: 'k-2' });
      const err = await producer
        .sendMany([
          { projectId: b, jobId: 'j', prompt: 'other project', key: 'k-2' },
          { projectId: b, jobId: 'j', prompt: 'new', key: 'k-3' },
          { projectId: a, jobId: 'j', prompt: 'same key, first shard', key: 'k-4' },
          { projectId: b, jobId: 'j', prompt: 'same key, second shard', key: 'k-4' },
          { projectId: b, jobId: 'j', prompt: 'no key' },
        ])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IdempotencyConflictError);
      const conflict = err as IdempotencyConflictError;
      expect(conflict.conflicts).toEqual([
        { index: 0, key: 'k-2', dispatchId: newDispatchId('k-2') },
        { index: 3, key: 'k-4', dispatchId: newDispatchId('k-4') },
      ]);
      expect(conflict.results).toEqual([
        null,
        { dispatchId: newDispatchId('k-3'), deduplicated: false },
        { dispatchId: newDispatchId('k-4'), deduplicated: false },
        null,
        { dispatchId: expect.any(String), deduplicated: false },
      ]);
      expect(await holders(newDispatchId('k-2'))).toEqual([shardOf(a, SHARDS)]);
      expect(await holders(newDispatchId('k-3'))).toEqual([shardOf(b, SHARDS)]);
      expect(await holders(newDispatchId('k-4'))).toEqual([shardOf(a, SHARDS)]);
    } finally {
      await producer.close();
    }
  });
});
