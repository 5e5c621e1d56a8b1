import { Redis } from 'ioredis';
import type { ClusterNode, LocalCluster } from './redis-cluster.js';

/**
 * Failovers of a local cluster with replicas (`startLocalCluster(3, { replicas: 1 })`): who
 * replicates whom, and the wait until a killed master's replica has taken over. Shared by the
 * cluster tests and the fault suite; it imports nothing from Vitest.
 */

/** One line of `CLUSTER NODES`: port, whether it is a master, which master it replicates. */
export interface NodeRole {
  readonly id: string;
  readonly port: number;
  readonly master: boolean;
  readonly failed: boolean;
  /** The master's id, for a replica. */
  readonly replicates: string | undefined;
}

/** The cluster's roles as `node` sees them. */
export async function clusterRoles(node: ClusterNode): Promise<NodeRole[]> {
  const client = new Redis(node.url, { maxRetriesPerRequest: 1, lazyConnect: true });
  client.on('error', () => {
    // A node being killed: the caller asks another one.
  });
  try {
    const table = String(await client.call('CLUSTER', 'NODES'));
    return table
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const [id = '', address = '', flags = '', replicates = '-'] = line.split(' ');
        return {
          id,
          port: Number(/:(\d+)@/.exec(address)?.[1]),
          master: flags.split(',').includes('master'),
          failed: /(^|,)fail(,|$)/.test(flags),
          replicates: replicates === '-' ? undefined : replicates,
        };
      });
  } finally {
    client.disconnect();
  }
}

/** The URL of the first of `nodes` that `CLUSTER NODES` calls a master (the seed of the tests). */
export async function firstMaster(nodes: readonly ClusterNode[]): Promise<string> {
  const first = nodes[0];
  if (!first) throw new Error('the cluster has no node');
  const masters = (await clusterRoles(first)).filter((r) => r.master).map((r) => r.port);
  const master = nodes.find((n) => masters.includes(n.port));
  if (!master) throw new Error('no master among the nodes of the cluster');
  return master.url;
}

/** The node at `url`, and the nodes that replicate it. */
export async function masterAndReplicas(
  cluster: LocalCluster,
  url: string,
): Promise<{ master: ClusterNode; replicas: ClusterNode[] }> {
  const master = cluster.nodes.find((n) => n.url === url);
  if (!master) throw new Error(`${url} is not a node of the cluster`);
  const roles = await clusterRoles(master);
  const id = roles.find((r) => r.port === master.port)?.id;
  const ports = roles.filter((r) => r.replicates === id).map((r) => r.port);
  return { master, replicas: cluster.nodes.filter((n) => ports.includes(n.port)) };
}

/**
 * Waits until one of `replicas` is a master the other survivors agree on, with `cluster_state:ok`
 * everywhere: the cluster's own (automatic) failover after the master was killed. Resolves with
 * the milliseconds it took and the promoted node.
 */
export async function waitForFailover(
  cluster: LocalCluster,
  replicas: readonly ClusterNode[],
  timeoutMs = 30_000,
): Promise<{ ms: number; promoted: ClusterNode }> {
  const from = Date.now();
  const alive = cluster.nodes.filter((n) => n.pid() !== undefined);
  for (;;) {
    const promoted = await promotedAmong(alive, replicas).catch(() => undefined);
    if (promoted) return { ms: Date.now() - from, promoted };
    if (Date.now() - from > timeoutMs)
      throw new Error(`no replica of the killed master took over within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function promotedAmong(
  alive: readonly ClusterNode[],
  replicas: readonly ClusterNode[],
): Promise<ClusterNode | undefined> {
  let promoted: ClusterNode | undefined;
  for (const node of alive) {
    const roles = await clusterRoles(node);
    const master = replicas.find((r) =>
      roles.some((role) => role.port === r.port && role.master && !role.failed),
    );
    if (!master || (promoted && promoted !== master)) return undefined;
    promoted = master;
    if (!(await clusterOk(node))) return undefined;
  }
  return promoted;
}

async function clusterOk(node: ClusterNode): Promise<boolean> {
  const client = new Redis(node.url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  try {
    return String(await client.call('CLUSTER', 'INFO')).includes('cluster_state:ok');
  } finally {
    client.disconnect();
  }
}
