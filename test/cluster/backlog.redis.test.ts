import { describe, expect, it } from 'vitest';
import { BacklogFullError, createProducer } from '../../src/producer/index.js';
import { keysFor, shardOf } from '../../src/redis/keys.js';
import { newDispatchId } from '../../src/store/register.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { useSimulator } from '../support/simulator.js';

const SHARDS = 3;

/**
 * `PROJECT_BACKLOG_MAX` on a cluster: REGISTER's check reads and writes keys of its shard it is not
 * given (the counts, the project's controls, the orphan and refusal markers), all in the shard's
 * slot; a project of another shard is not held back.
 */
describe('a project backlog limit on a cluster (DISPATCH_SHARDS=3)', () => {
  const simulator = useSimulator();
  const fleet = useClusterFleet(simulator, { masters: 3, shards: SHARDS });

  it('refuses in REGISTER on the shard of the project, whole, across REGISTER calls', async () => {
    const [a = '', b = ''] = fleet().evenProjects(SHARDS, 'backlog');
    expect(shardOf(a, SHARDS)).not.toBe(shardOf(b, SHARDS));
    const producer = createProducer({
      redisUrl: fleet().cluster.url,
      prefix: fleet().prefix,
      shards: SHARDS,
      cluster: true,
      durability: { mode: 'none' },
      projectBacklogMax: 1_050,
    });
    const keyed = (projectId: string, count: number, from = 0) =>
      Array.from({ length: count }, (_, i) => ({
        projectId,
        jobId: `j${from + i}`,
        prompt: 'p',
        key: `${projectId}-${from + i}`,
      }));
    try {
      const err = await producer.sendMany(keyed(a, 1_100)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BacklogFullError);
      expect(err).toMatchObject({ projectId: a, queued: 0, adding: 1_100 });
      const shardA = fleet().shards()[shardOf(a, SHARDS)];
      const at = keysFor(shardA?.prefix ?? '');
      expect(await fleet().redis.hget(at.openCounts, `q:${a}`)).toBeNull();
      expect(await fleet().redis.exists(at.dispatch(newDispatchId(`${a}-0`)))).toBe(0);
      expect(await producer.sendMany(keyed(a, 1_000))).toHaveLength(1_000);
      expect(await fleet().redis.exists(at.dispatch(newDispatchId(`${a}-0`)))).toBe(1);
      expect(await producer.sendMany(keyed(b, 1_050))).toHaveLength(1_050);
      await expect(producer.sendMany(keyed(a, 51, 2_000))).rejects.toBeInstanceOf(BacklogFullError);
      expect(await producer.sendMany(keyed(a, 50, 2_000))).toHaveLength(50);
    } finally {
      await producer.close();
    }
  });
});
