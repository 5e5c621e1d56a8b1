import { describe, expect, it } from 'vitest';
import { createProducer, IdempotencyConflictError } from '../../src/producer/index.js';
import { claimShardOf, keysFor, shardOf } from '../../src/redis/keys.js';
import { keySlot } from '../../src/redis/slot.js';
import { newDispatchId } from '../../src/store/register.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { callsPerNode, nodeOfSlot, resetCommandStats } from '../support/redis-cluster.js';
import { useSimulator } from '../support/simulator.js';

const SHARDS = 6;

describe('idempotency keys across the shards of a cluster (DISPATCH_SHARDS=6)', () => {
  const simulator = useSimulator();
  // Valkey with an AOF, so that a producer with REDIS_DURABILITY=fsync waits with WAITAOF.
  const fleet = useClusterFleet(simulator, {
    masters: 3,
    shards: SHARDS,
    persistence: { server: 'valkey', appendonly: 'yes', appendfsync: 'everysec' },
  });
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

  it('accepts a key once when two producers (REDIS_DURABILITY=fsync) send it at the same moment for projects of two shards, its claim waited on disk on its own master', async () => {
    const [a, b] = projects();
    const open = () =>
      createProducer({
        redisUrl: fleet().cluster.url,
        prefix: fleet().prefix,
        shards: SHARDS,
        cluster: true,
        durability: { mode: 'fsync', replicas: 0, strict: true },
      });
    const [first, second] = [open(), open()];
    try {
      // Each producer probes the servers on its first send: after that, both race at once.
      await Promise.all(
        [first, second].map((p, i) => p.send({ projectId: a, jobId: 'warm', prompt: `${i}` })),
      );
      const keys = Array.from({ length: 20 }, (_, i) => `race-${i}`);
      const send = (producer: typeof first, projectId: string, key: string) =>
        producer.send({ projectId, jobId: 'j', prompt: projectId, key }).then(
          () => 'accepted',
          (err: unknown) => {
            if (err instanceof IdempotencyConflictError) return 'conflict';
            throw err;
          },
        );
      const answers = await Promise.all(
        keys.map((key) => Promise.all([send(first, a, key), send(second, b, key)])),
      );
      for (const [i, key] of keys.entries()) {
        expect([...(answers[i] ?? [])].sort(), key).toEqual(['accepted', 'conflict']);
        expect(await holders(newDispatchId(key)), key).toHaveLength(1);
      }

      // A key whose claim sits on another master than its project's shard: both wait on disk.
      const { cluster } = fleet();
      const masterOf = (shard: number) =>
        nodeOfSlot(cluster, keySlot(fleet().shards()[shard]?.prefix ?? ''));
      let key = '';
      for (let i = 0; !key; i++) {
        const claimShard = claimShardOf(newDispatchId(`apart-${i}`), SHARDS);
        if ((await masterOf(claimShard)) !== (await masterOf(shardOf(a, SHARDS))))
          key = `apart-${i}`;
      }
      await resetCommandStats(cluster);
      await first.send({ projectId: a, jobId: 'j', prompt: 'apart', key });
      const waits = await callsPerNode(cluster, 'waitaof');
      expect(waits[await masterOf(claimShardOf(newDispatchId(key), SHARDS))]).toBe(1);
      expect(waits[await masterOf(shardOf(a, SHARDS))]).toBe(1);
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });
});
