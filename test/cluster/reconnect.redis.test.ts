import type { Cluster } from 'ioredis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/redis/connections.js';
import { startLocalCluster, type LocalCluster } from '../support/redis-cluster.js';
import { waitUntil } from '../support/redis-sentinel.js';

/** Whether the node at `url` says `cluster_state:fail`. */
async function clusterFails(url: string): Promise<boolean> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  try {
    return String(await client.call('CLUSTER', 'INFO')).includes('cluster_state:fail');
  } finally {
    client.disconnect();
  }
}

describe('a cluster connection started while a master is down', () => {
  let cluster: LocalCluster;
  beforeAll(async () => {
    cluster = await startLocalCluster(3);
  }, 60_000);
  afterAll(() => cluster?.destroy());

  // BullMQ resets a Worker's blocking connection this way (disconnect, then connect) and awaits
  // the connect: one that never settled left the Worker fetching no job again.
  it('settles its connect() once the cluster serves again, though its ready check failed', async () => {
    const [first, victim] = cluster.nodes;
    if (!first || !victim) throw new Error('the cluster has 3 nodes');
    const redis = connect({ redisUrl: cluster.url, redisCluster: true }, 'worker', 'test');
    redis.on('error', () => {});
    const client = redis as unknown as Cluster;
    try {
      expect(await redis.ping()).toBe('PONG');
      await victim.stop('SIGKILL');
      await waitUntil(() => clusterFails(first.url), 'cluster_state:fail');
      client.disconnect();
      // Its pool says `close` once per node that ends: the last must not leave it `close`.
      await waitUntil(async () => client.status === 'end', 'the client ended');

      // The ready check answers cluster_state:fail: ioredis disconnects and tries again.
      const readyCheckFailed = new Promise<void>((resolve) => client.once('reconnecting', resolve));
      let settled: 'resolved' | 'rejected' | undefined;
      const connecting = client.connect().then(
        () => (settled = 'resolved'),
        () => (settled = 'rejected'),
      );
      await readyCheckFailed;
      await victim.restart();
      await cluster.waitUntilOk();
      await waitUntil(async () => client.status === 'ready', 'the client ready again');

      await waitUntil(async () => settled !== undefined, 'connect() settled', 5_000);
      await connecting;
      expect(settled).toBe('resolved');
      expect(await redis.ping()).toBe('PONG');
    } finally {
      redis.disconnect();
    }
  }, 90_000);
});
