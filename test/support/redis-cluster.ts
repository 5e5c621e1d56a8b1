import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { firstMaster } from './cluster-failover.js';
import { freePort, localServerArgs, removeServerDir, serverProcess } from './redis-server.js';

/**
 * A real local Redis Cluster of masters only (no replica): one `redis-server --cluster-enabled yes`
 * process per master on a free loopback port, joined with `redis-cli --cluster create`; or the
 * same with `valkey-server` and `valkey-cli` (Valkey 8 has WAITAOF, Redis 7.0 has not). Shared by
 * the cluster tests and the bench; it imports nothing from Vitest.
 */

const run = promisify(execFile);

/** One master of a {@link LocalCluster}. */
export interface ClusterNode {
  readonly port: number;
  readonly url: string;
  /** The running process's id (the bench reads its CPU time). */
  pid(): number | undefined;
  /** Kills the process with `signal` (SIGKILL: a crash) and waits for it to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and data folder (its nodes.conf keeps its slots). */
  restart(): Promise<void>;
}

/** A started cluster: `url` is a seed node; `destroy` stops every node and removes its files. */
export interface LocalCluster {
  readonly url: string;
  readonly nodes: readonly ClusterNode[];
  /** Resolves once every node reports `cluster_state:ok`. */
  waitUntilOk(timeoutMs?: number): Promise<void>;
  destroy(): Promise<void>;
}

/** Which server the nodes run, and how they keep their writes. */
export interface ClusterPersistence {
  /** @defaultValue `redis` (redis-server and redis-cli; `valkey`: valkey-server and valkey-cli) */
  readonly server?: 'redis' | 'valkey';
  /** @defaultValue `no`: a restarted master comes back empty */
  readonly appendonly?: 'yes' | 'no';
  /** @defaultValue `everysec` */
  readonly appendfsync?: 'always' | 'everysec' | 'no';
  /** Replicas of each master (`--cluster-replicas`; 3 masters or more). @defaultValue 0 */
  readonly replicas?: number;
}

/** Starts `masters` nodes (at least 1) and joins them into one cluster with every slot covered. */
export async function startLocalCluster(
  masters = 3,
  persistence: ClusterPersistence = {},
): Promise<LocalCluster> {
  const root = mkdtempSync(join(tmpdir(), 'agent-dispatch-cluster-'));
  const nodes: (ClusterNode & { kill(): Promise<void> })[] = [];
  const replicas = persistence.replicas ?? 0;
  try {
    for (let i = 0; i < masters * (1 + replicas); i++)
      nodes.push(await startNode(join(root, String(i)), persistence));
    const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
    const server = persistence.server ?? 'redis';
    if (masters >= 3) {
      await cli(server, [
        '--cluster',
        'create',
        ...addresses,
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ]);
    } else {
      // redis-cli --cluster create wants 3 masters; fewer are joined by hand (bench: 1 and 2).
      await joinByHand(nodes.map((n) => n.port));
    }
    const cluster: LocalCluster = {
      // With replicas, redis-cli picks the masters: the seed is one of them.
      url: replicas > 0 ? await firstMaster(nodes) : `redis://127.0.0.1:${nodes[0]?.port ?? 0}`,
      nodes,
      waitUntilOk: (timeoutMs = 20_000) => waitForOk(nodes, timeoutMs),
      async destroy() {
        await Promise.all(nodes.map((n) => n.kill()));
        removeServerDir(root);
      },
    };
    await cluster.waitUntilOk();
    return cluster;
  } catch (err) {
    await Promise.all(nodes.map((n) => n.kill()));
    removeServerDir(root);
    throw err;
  }
}

async function cli(server: 'redis' | 'valkey', args: string[]): Promise<string> {
  try {
    const { stdout } = await run(`${server}-cli`, args, { timeout: 30_000 });
    return stdout;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error(
        server === 'redis'
          ? 'redis-cli is not installed: apt-get install -y redis-tools (or redis-server)'
          : 'valkey-cli is not installed: apt-get install -y -t bookworm-backports valkey-server',
      );
    throw err;
  }
}

async function startNode(
  dir: string,
  persistence: ClusterPersistence,
): Promise<ClusterNode & { kill(): Promise<void> }> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const binary = persistence.server === 'valkey' ? 'valkey-server' : 'redis-server';
  const { launch, stop, pid } = serverProcess(binary, url, [
    ...localServerArgs(port, dir, persistence),
    '--cluster-enabled',
    'yes',
    // A node that never met another one would announce no address in CLUSTER SLOTS.
    '--cluster-announce-ip',
    '127.0.0.1',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    '2000',
  ]);
  await launch();
  return {
    port,
    url,
    pid,
    stop,
    restart: launch,
    kill: () => stop('SIGKILL'),
  };
}

/** Joins 1 or 2 masters: MEET, then every slot split evenly with ADDSLOTSRANGE. */
async function joinByHand(ports: readonly number[]): Promise<void> {
  const clients = ports.map((port) => new Redis(port, '127.0.0.1'));
  try {
    const [first] = clients;
    for (const port of ports.slice(1)) await first?.call('CLUSTER', 'MEET', '127.0.0.1', port);
    const per = Math.ceil(16384 / ports.length);
    await Promise.all(
      clients.map((c, i) =>
        c.call('CLUSTER', 'ADDSLOTSRANGE', i * per, Math.min(16383, (i + 1) * per - 1)),
      ),
    );
  } finally {
    for (const c of clients) c.disconnect();
  }
}

async function waitForOk(nodes: readonly ClusterNode[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const node of nodes) {
    const client = new Redis(node.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => {
      // A node still starting: the loop below asks again.
    });
    try {
      for (;;) {
        const info = await client.call('CLUSTER', 'INFO').catch(() => '');
        const known = await client.call('CLUSTER', 'NODES').catch(() => '');
        const connected = String(known)
          .split('\n')
          .filter((l) => l.includes('connected')).length;
        // A replica in sync, too: a master killed before its replica's first sync has no copy
        // to promote.
        const replication = String(await client.info('replication').catch(() => ''));
        const synced =
          !replication.includes('role:slave') || replication.includes('master_link_status:up');
        if (String(info).includes('cluster_state:ok') && connected >= nodes.length && synced) break;
        if (Date.now() > deadline)
          throw new Error(
            `cluster node ${node.url} not ok within ${timeoutMs} ms: ${String(info).split('\n')[0]}`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      client.disconnect();
    }
  }
}

/** Commands the measurement itself sends, and a client's topology reads: not the service's load. */
const NOT_LOAD = /^cmdstat_(info|config|cluster|command|ping|client|hello)[|:]/;

/** Resets every node's command counters (`CONFIG RESETSTAT`). */
export async function resetCommandStats(cluster: LocalCluster): Promise<void> {
  await Promise.all(cluster.nodes.map((n) => onNode(n, (c) => c.call('CONFIG', 'RESETSTAT'))));
}

/**
 * Commands each node processed since {@link resetCommandStats} (`INFO commandstats`, `calls=`
 * summed), in node order, leaving out the administrative ones ({@link NOT_LOAD}).
 */
export async function commandsPerNode(cluster: LocalCluster): Promise<number[]> {
  return Promise.all(
    cluster.nodes.map(async (n) => {
      const info = String(await onNode(n, (c) => c.call('INFO', 'commandstats')));
      return info
        .split('\n')
        .filter((line) => line.startsWith('cmdstat_') && !NOT_LOAD.test(line))
        .reduce((sum, line) => sum + Number(/calls=(\d+)/.exec(line)?.[1] ?? 0), 0);
    }),
  );
}

/** Calls of one command (`waitaof`) each node processed since {@link resetCommandStats}, in node order. */
export async function callsPerNode(cluster: LocalCluster, command: string): Promise<number[]> {
  const line = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm');
  return Promise.all(
    cluster.nodes.map(async (n) => {
      const info = String(await onNode(n, (c) => c.call('INFO', 'commandstats')));
      return Number(line.exec(info)?.[1] ?? 0);
    }),
  );
}

async function onNode<T>(node: ClusterNode, run: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(node.url, { maxRetriesPerRequest: 1 });
  try {
    return await run(client);
  } finally {
    client.disconnect();
  }
}

/** The index in `cluster.nodes` of the master that serves `slot` (`CLUSTER SLOTS`). */
export async function nodeOfSlot(cluster: LocalCluster, slot: number): Promise<number> {
  const first = cluster.nodes[0];
  if (!first) throw new Error('the cluster has no node');
  const ranges = (await onNode(first, (c) => c.call('CLUSTER', 'SLOTS'))) as [
    number,
    number,
    [string, number, ...unknown[]],
  ][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  const index = cluster.nodes.findIndex((n) => n.port === range?.[2][1]);
  if (index === -1) throw new Error(`no master serves slot ${slot}`);
  return index;
}
