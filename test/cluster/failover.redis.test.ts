import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { QUEUE_NAMES, shardOf } from '../../src/redis/keys.js';
import { whereIs } from '../support/where-is.js';
import { createProducer } from '../../src/producer/index.js';
import { connect } from '../../src/redis/connections.js';
import { masterAndReplicas, waitForFailover } from '../support/cluster-failover.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { shortDrill } from '../support/drill-fleet.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

const SHARDS = 6;

/** `reply`, or a rejection naming `what` when it takes over 20 s (a client that never connects). */
function answered<T>(reply: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} never answered`)), 20_000);
  });
  return Promise.race([reply, late]).finally(() => clearTimeout(timer));
}

describe('a Valkey cluster of 3 masters and 3 replicas, REDIS_DURABILITY=replicas:1', () => {
  const simulator = useSimulator({ workTimeMs: 100, sendLimit: { max: 20, windowMs: 2_000 } });
  const fleet = useClusterFleet(simulator, {
    masters: 3,
    shards: SHARDS,
    persistence: { server: 'valkey', appendonly: 'yes', appendfsync: 'always', replicas: 1 },
  });

  it('loses and repeats nothing when the master REDIS_URL names is killed and its replica takes over', async () => {
    const { cluster, redis, processes } = fleet();
    const env = fleet().env({ REDIS_DURABILITY: 'replicas:1', REPAIR_GRACE: '5s' });
    const producer = createProducer({
      redisUrl: cluster.url,
      prefix: fleet().prefix,
      shards: SHARDS,
      cluster: true,
      durability: { mode: 'fsync', replicas: 1, strict: false },
    });
    // A client seeded with the URL of the master about to die, as a role is.
    const seeded = connect({ redisUrl: cluster.url, redisCluster: true }, 'worker', 'seeded');
    seeded.on('error', () => {});
    try {
      expect(await seeded.ping()).toBe('PONG');
      const projects = fleet().evenProjects(12, 'f');
      const result = await shortDrill(
        {
          env,
          processes,
          producer,
          simulator: simulator(),
          waitForRoles: async () => {
            for (const shard of fleet().shards())
              await waitForWorkers({ redis, prefix: shard.prefix }, 2, { processes });
          },
          kill: async () => {
            const { master, replicas } = await masterAndReplicas(cluster, cluster.url);
            await master.stop('SIGKILL');
            return (await waitForFailover(cluster, replicas)).ms;
          },
          promptEvents: () => fleet().promptEvents(),
        },
        projects,
      );
      console.log(
        `cluster failover: ${result.refused.length} refused; ${result.lost.length} of ${result.enqueued} follow-ups without an event ` +
          `(${result.lostAfterSend.length} of them sent), ${result.duplicateSends.length} sent twice, ` +
          `${result.duplicateEvents.length} with two events; replica took over in ${result.failoverMs.join(', ')} ms`,
      );
      for (const prompt of result.lost) {
        const dispatchId = result.dispatchIds.get(prompt) ?? '';
        const shard = fleet().shards()[shardOf(prompt.split('/')[0] ?? '', SHARDS)];
        if (!shard) continue;
        const queue = new Queue(QUEUE_NAMES.dispatch, { connection: redis, prefix: shard.prefix });
        const where = await whereIs(redis, shard.prefix, dispatchId, (id) => queue.getJobState(id));
        await queue.close();
        console.log(`${prompt} (shard ${shard.index}): ${where}`);
      }
      expect(result.refused, result.refusedBecause.join('; ')).toEqual([]);
      expect(result.lost).toEqual([]);
      expect(result.duplicateSends).toEqual([]);
      expect(result.duplicateEvents).toEqual([]);
      expect(result.logs).not.toMatch(/CROSSSLOT/);

      // Its duplicates (BullMQ's blocking connections) start from the nodes it learned of, not
      // from the dead seed alone.
      const copy = seeded.duplicate();
      copy.on('error', () => {});
      expect(await answered(copy.ping(), 'a duplicate')).toBe('PONG');
      copy.disconnect();

      // A role started now, with the dead master first in its list of seeds, finds the cluster.
      const others = cluster.nodes.filter((n) => n.url !== cluster.url).map((n) => n.port);
      const seeds = [cluster.url, ...others.map((port) => `127.0.0.1:${port}`)].join(',');
      processes.push(...startRoles('worker', 1, { ...env, REDIS_URL: seeds }));
      for (const shard of fleet().shards())
        await waitForWorkers({ redis, prefix: shard.prefix }, 3, { processes });
    } finally {
      seeded.disconnect();
      await producer.close();
    }
  }, 240_000);
});
