import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { LayoutError } from '../../src/redis/layout.js';
import { layoutKey, shardLayout } from '../../src/redis/keys.js';
import { runCliToEnd } from '../support/cli.js';
import { fleetEnv, grid, useFleet } from '../support/fleet.js';
import { startLocalCluster, type LocalCluster } from '../support/redis-cluster.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

describe('a start that the Redis contradicts', () => {
  const simulator = useSimulator({ workTimeMs: 50 });
  const fleet = useFleet('layout', simulator);
  let cluster: LocalCluster;
  beforeAll(async () => {
    cluster = await startLocalCluster(1);
  }, 60_000);
  afterAll(() => cluster?.destroy());

  it('exits 2 naming REDIS_CLUSTER when the setting and the server disagree', async () => {
    const env = fleetEnv(fleet().ns, simulator());
    const unset = await runCliToEnd(['worker'], { ...env, REDIS_URL: cluster.url });
    expect(unset.code).toBe(2);
    expect(unset.stderr).toContain(
      'REDIS_CLUSTER: is not set, but REDIS_URL is a node of a Redis Cluster (cluster_enabled:1): set REDIS_CLUSTER=true',
    );
    const set = await runCliToEnd(['poller'], {
      ...env,
      REDIS_CLUSTER: 'true',
      REDIS_DURABILITY: 'none',
    });
    expect(set.code).toBe(2);
    expect(set.stderr).toContain('REDIS_CLUSTER: is true, but REDIS_URL is a single Redis');
  }, 60_000);

  it('refuses another DISPATCH_SHARDS while follow-ups of the old count are open, takes it after the drain', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator());
    const inputs = grid(simulator(), 3, 2, 2);
    await producer.sendMany(inputs);

    const refused = await runCliToEnd(['worker'], { ...env, DISPATCH_SHARDS: '4' });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      `DISPATCH_SHARDS: is 4, but this Redis holds ${inputs.length} unfinished follow-ups written with DISPATCH_SHARDS=1`,
    );

    // The drain: the fleet at the old count ends every follow-up.
    fleet().processes = [...startRoles('worker', 1, env), ...startRoles('poller', 1, env)];
    await fleet().events(inputs.length);
    expect(await ns.redis.get(layoutKey(ns.prefix))).toBe('1');
    await stopAll(fleet().processes.splice(0));

    fleet().processes = startRoles('worker', 1, { ...env, DISPATCH_SHARDS: '4' });
    // Shard 3's tag may carry a suffix (slot.ts): the layout says which.
    const shard3 = shardLayout(ns.prefix, ns.eventsStream, 4, false)[3]?.prefix ?? '';
    try {
      await waitForWorkers({ redis: ns.redis, prefix: shard3 }, 1, {
        processes: fleet().processes,
      });
      expect(await ns.redis.get(layoutKey(ns.prefix))).toBe('4');

      // A producer started at the old count is refused before it writes anything.
      const one = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix, shards: 1 });
      const four = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix, shards: 4 });
      try {
        await expect(one.send({ projectId: 'p0', jobId: 'j0', prompt: 'old' })).rejects.toThrow(
          'DISPATCH_SHARDS: is 1, but the fleet on this Redis runs with 4',
        );
        await expect(one.send({ projectId: 'p0', jobId: 'j0', prompt: 'old' })).rejects.toThrow(
          LayoutError,
        );
        await expect(four.send({ projectId: 'p0', jobId: 'j0', prompt: 'new' })).resolves.toEqual({
          dispatchId: expect.any(String),
          deduplicated: false,
        });
      } finally {
        await Promise.all([one.close(), four.close()]);
      }
    } finally {
      // The namespace's clean-up deletes `<prefix>:*`; the shards' keys start with `{<prefix>:`.
      const keys = await ns.redis.keys(`{${ns.prefix}:*`);
      if (keys.length > 0) await ns.redis.unlink(...keys);
    }
  }, 90_000);
});
