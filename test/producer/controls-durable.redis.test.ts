import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createAdmin, createProducer } from '../../src/producer/index.js';
import { runCliToEnd } from '../support/cli.js';
import { monitorServer, type Monitor } from '../support/monitor.js';
import { startPrivateRedis, usePrivateRedis } from '../support/redis-server.js';
import { eventually } from '../support/namespace.js';

/**
 * Under REDIS_DURABILITY=fsync (the default) on Valkey, which has WAITAOF, every operator change
 * (cancel, pause, resume, limit, clear) answers only after a WAITAOF that follows its write, as an
 * enqueue does: MONITOR shows the server's commands in the order it ran them.
 */
describe('the operator controls wait for the disk (Valkey, MONITOR)', () => {
  const served = usePrivateRedis('valkey-server');

  /**
   * Runs `change`, then the server's commands since it began: a WAITAOF after its script, from the
   * same client (WAITAOF vouches for its own connection's writes only).
   */
  async function waitsAfterWrite(monitor: Monitor, what: string, change: () => Promise<unknown>) {
    await monitor.settle();
    const from = monitor.commands.length;
    await change();
    await monitor.settle();
    const names = monitor.commands.slice(from).map(([name]) => name);
    const write = names.findIndex((n) => n === 'EVALSHA' || n === 'EVAL');
    expect(write, `${what}: ${names.join(' ')}`).toBeGreaterThanOrEqual(0);
    const wait = names.indexOf('WAITAOF', write);
    expect(wait, `${what}: ${names.join(' ')}`).toBeGreaterThan(write);
    expect(monitor.sources[from + write], what).toMatch(/:\d+$/);
    expect(monitor.sources[from + wait], what).toBe(monitor.sources[from + write]);
  }

  it('cancel, pause, resume, limit and clear each answer after a WAITAOF of their write', async () => {
    const url = served().server.url;
    const prefix = 'durable-controls';
    const admin = createAdmin({ redisUrl: url, prefix });
    const producer = createProducer({ redisUrl: url, prefix });
    const monitor = await monitorServer(url);
    try {
      const [a, b] = await producer.sendMany([
        { projectId: 'p', jobId: 'a', prompt: 'one' },
        { projectId: 'p', jobId: 'b', prompt: 'two' },
      ]);
      await waitsAfterWrite(monitor, 'pause', () => admin.pauseProject('p'));
      await waitsAfterWrite(monitor, 'resume', () => admin.resumeProject('p'));
      await waitsAfterWrite(monitor, 'limit', () => admin.setProjectLimit('p', '5/1h'));
      await waitsAfterWrite(monitor, 'clear', () => admin.clearProjectLimit('p'));
      await waitsAfterWrite(monitor, 'admin cancel', () => admin.cancel(a?.dispatchId ?? ''));
      await waitsAfterWrite(monitor, 'producer cancel', () => producer.cancel(b?.dispatchId ?? ''));
    } finally {
      await Promise.all([monitor.stop(), admin.close(), producer.close()]);
    }
  });

  it('a change whose WAITAOF falls short rejects as retryable, saying it may be kept', async () => {
    // A replica that never acknowledges (stopped): the master counts it, so every WAITAOF for one
    // replica falls short. (A master without any replica would not be waited on for one.)
    const replica = await frozenReplicaOf(served().server.url);
    const admin = createAdmin({
      redisUrl: served().server.url,
      prefix: 'durable-short',
      durability: { mode: 'fsync', replicas: 1, strict: false },
      durabilityTimeoutMs: 100,
    });
    const producer = createProducer({
      redisUrl: served().server.url,
      prefix: 'durable-short',
      durability: { mode: 'none' },
    });
    try {
      await expect(admin.pauseProject('p')).rejects.toMatchObject({
        code: 'redis_unavailable',
        message: expect.stringMatching(
          /WAITAOF answered 1 local and 0 replica.*may or may not be kept/,
        ),
      });
      // A cancel too: written, not confirmed, so the answer cannot say it holds (or that it failed).
      const { dispatchId } = await producer.send({ projectId: 'c', jobId: 'j', prompt: 'x' });
      await expect(admin.cancel(dispatchId)).rejects.toMatchObject({
        code: 'redis_unavailable',
        message: expect.stringMatching(/WAITAOF .*the cancel may or may not be kept: see status/),
      });
      expect(await producer.status(dispatchId)).toMatchObject({ type: 'followup.cancelled' });
    } finally {
      await Promise.all([admin.close(), producer.close()]);
      await replica.destroy();
    }
  });

  it('project pause as a process waits too', async () => {
    const url = served().server.url;
    const monitor = await monitorServer(url);
    try {
      await waitsAfterWrite(monitor, 'project pause', async () => {
        const res = await runCliToEnd(['project', 'pause', 'q'], {
          REDIS_URL: url,
          DISPATCH_PREFIX: 'durable-cli',
          LOG_LEVEL: 'warn',
        });
        expect([res.code, res.stderr]).toEqual([0, '']);
      });
    } finally {
      await monitor.stop();
    }
  }, 60_000);
});

/**
 * A Valkey replica of `masterUrl`, once the master lists it, then stopped (SIGSTOP): it stays in
 * the master's ROLE but acknowledges nothing. `destroy` lets it go on and removes it.
 */
async function frozenReplicaOf(masterUrl: string) {
  const replica = await startPrivateRedis('valkey-server');
  const client = new Redis(replica.url);
  const master = new URL(masterUrl);
  await client.call('REPLICAOF', master.hostname, master.port);
  const pid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1]);
  client.disconnect();
  const masterClient = new Redis(masterUrl);
  const replicaClient = new Redis(replica.url);
  // In sync first (its link up, listed by the master): a replica stopped mid-sync would leave
  // the master's transfer to it hanging.
  await eventually(
    async () => {
      const linked = /master_link_status:up/.test(await replicaClient.info('replication'));
      const role = (await masterClient.call('ROLE')) as unknown[];
      return linked && Array.isArray(role[2]) && role[2].length === 1 ? true : undefined;
    },
    { timeoutMs: 30_000, what: 'the replica in sync with its master' },
  );
  masterClient.disconnect();
  replicaClient.disconnect();
  process.kill(pid, 'SIGSTOP');
  return {
    async destroy() {
      // SIGKILL: a replica let go on after its stop may take its time over a graceful shutdown.
      process.kill(pid, 'SIGCONT');
      await replica.stop('SIGKILL');
      await replica.destroy();
    },
  };
}
