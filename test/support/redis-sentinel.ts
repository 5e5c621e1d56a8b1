import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import {
  freePort,
  localServerArgs,
  removeServerDir,
  serverProcess,
  type ServerProcess,
} from './redis-server.js';

/**
 * A real local Redis Sentinel deployment: one `valkey-server` primary and its replicas (AOF,
 * `appendfsync always`), and 3 sentinels (`valkey-server --sentinel`) watching it as `main` with
 * a quorum of 2 and a 1 s `down-after-milliseconds`, so a killed primary is replaced in seconds.
 * Shared by the tests and the fault suite; it imports nothing from Vitest.
 */

/** The name the sentinels know the primary by. */
export const SENTINEL_NAME = 'main';

/** One data node: its port and process. */
export interface DataNode extends ServerProcess {
  readonly port: number;
}

/** A started deployment; `destroy` stops every process and removes its files. */
export interface LocalSentinel {
  /** `REDIS_SENTINELS` for it. */
  readonly sentinels: string;
  readonly nodes: readonly DataNode[];
  /** The port the sentinels name as primary now. */
  primaryPort(): Promise<number>;
  destroy(): Promise<void>;
}

/** Starts a primary, `replicas` replicas and 3 sentinels; resolves once all see the replicas. */
export async function startLocalSentinel(replicas = 1): Promise<LocalSentinel> {
  const root = mkdtempSync(join(tmpdir(), 'agent-dispatch-sentinel-'));
  const processes: ServerProcess[] = [];
  const nodes: DataNode[] = [];
  try {
    for (let i = 0; i <= replicas; i++) {
      const port = await freePort();
      const dir = join(root, `node${i}`);
      mkdirSync(dir);
      const args = localServerArgs(port, dir, { appendonly: 'yes', appendfsync: 'always' });
      const primary = nodes[0]?.port;
      const proc = serverProcess('valkey-server', `redis://127.0.0.1:${port}`, [
        ...args,
        ...(primary === undefined ? [] : ['--replicaof', '127.0.0.1', String(primary)]),
      ]);
      await proc.launch();
      processes.push(proc);
      nodes.push({ ...proc, port });
    }
    const sentinelPorts: number[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = join(root, `sentinel${i}.conf`);
      writeFileSync(conf, sentinelConf(port, nodes[0]?.port ?? 0));
      const proc = serverProcess('valkey-server', `redis://127.0.0.1:${port}`, [
        conf,
        '--sentinel',
      ]);
      await proc.launch();
      processes.push(proc);
      sentinelPorts.push(port);
    }
    const primaryPort = () => askSentinels(sentinelPorts);
    await waitUntil(
      () => replicasSeen(sentinelPorts[0] ?? 0, replicas),
      'the sentinels to see the replicas',
    );
    // In sync, too: a primary killed before its replica's first sync has no copy to promote (the
    // drills would then wait for a failover that never comes).
    await waitUntil(
      () => replicasInSync(nodes.slice(1).map((n) => n.port)),
      'the replicas to finish their first sync',
    );
    return {
      sentinels: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
      nodes,
      primaryPort,
      async destroy() {
        await Promise.all(processes.map((p) => p.stop('SIGKILL')));
        removeServerDir(root);
      },
    };
  } catch (err) {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    removeServerDir(root);
    throw err;
  }
}

function sentinelConf(port: number, primary: number): string {
  return [
    `port ${port}`,
    'bind 127.0.0.1',
    `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${primary} 2`,
    `sentinel down-after-milliseconds ${SENTINEL_NAME} 1000`,
    `sentinel failover-timeout ${SENTINEL_NAME} 5000`,
    `sentinel parallel-syncs ${SENTINEL_NAME} 1`,
    '',
  ].join('\n');
}

async function onPort<T>(port: number, run: (c: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  try {
    return await run(client);
  } finally {
    client.disconnect();
  }
}

/** The primary's port as the first sentinel that answers names it. */
async function askSentinels(ports: readonly number[]): Promise<number> {
  for (const port of ports) {
    const reply = await onPort(port, (c) =>
      c.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_NAME),
    ).catch(() => undefined);
    if (Array.isArray(reply)) return Number(reply[1]);
  }
  throw new Error('no sentinel answered');
}

/** Whether every replica's link to its primary is up (its first sync done). */
async function replicasInSync(ports: readonly number[]): Promise<boolean> {
  const infos = await Promise.all(
    ports.map((port) => onPort(port, (c) => c.info('replication')).catch(() => '')),
  );
  return infos.every((info) => /master_link_status:up/.test(info));
}

async function replicasSeen(sentinelPort: number, count: number): Promise<boolean> {
  const reply = (await onPort(sentinelPort, (c) =>
    c.call('SENTINEL', 'replicas', SENTINEL_NAME),
  )) as string[][];
  const online = reply.filter((r) => !String(r[r.indexOf('flags') + 1]).includes('down'));
  return online.length >= count;
}

/** Polls `check` every 100 ms until it is true, for up to `timeoutMs`. */
export async function waitUntil(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
): Promise<number> {
  const from = Date.now();
  for (;;) {
    if (await check().catch(() => false)) return Date.now() - from;
    if (Date.now() - from > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * SIGKILLs the primary and waits until the sentinels name another node that answers as master.
 * With `rejoin`, starts the killed node again and waits until it is a replica in sync (for the
 * next kill). Resolves with the milliseconds from the kill to the new primary.
 */
export async function killPrimary(sentinel: LocalSentinel, rejoin: boolean): Promise<number> {
  const port = await sentinel.primaryPort();
  const victim = sentinel.nodes.find((n) => n.port === port);
  if (!victim) throw new Error(`the primary ${port} is not a node of the deployment`);
  await victim.stop('SIGKILL');
  const ms = await waitUntil(async () => {
    const now = await sentinel.primaryPort();
    if (now === port) return false;
    const role = (await onPort(now, (c) => c.call('ROLE'))) as unknown[];
    return role[0] === 'master';
  }, 'a replica promoted by the sentinels');
  if (rejoin) {
    await victim.launch();
    // The sentinels turn a returning primary into a replica only after it has reported itself a
    // master for a while, then it syncs in full: on a loaded machine that outlasts 30 s.
    await waitUntil(
      async () => {
        const role = (await onPort(port, (c) => c.call('ROLE'))) as unknown[];
        return role[0] === 'slave' && role[3] === 'connected';
      },
      'the killed primary back as a replica in sync',
      90_000,
    );
  }
  return ms;
}
