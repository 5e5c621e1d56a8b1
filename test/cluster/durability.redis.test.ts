import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { assessDurability, probeServer } from '../../src/redis/durability.js';
import { shardOf } from '../../src/redis/keys.js';
import { keySlot } from '../../src/redis/slot.js';
import { LIFECYCLE } from '../../src/telemetry/names.js';
import { logLines } from '../support/cli.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { duplicates } from '../support/events.js';
import { grid, roundsOf } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { callsPerNode, nodeOfSlot, resetCommandStats } from '../support/redis-cluster.js';
import { freePort } from '../support/redis-server.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

const SHARDS = 6;
const JOBS = 2;
const ROUNDS = 3;

describe('REDIS_DURABILITY=fsync on a Valkey cluster of 3 masters, DISPATCH_SHARDS=6', () => {
  const simulator = useSimulator({ workTimeMs: 50 });
  const fleet = useClusterFleet(simulator, {
    masters: 3,
    shards: SHARDS,
    persistence: { server: 'valkey', appendonly: 'yes', appendfsync: 'always' },
  });

  it("sends each WAITAOF to the master of the shard it waits for, at most one per wait point of that shard's follow-ups", async () => {
    const { cluster, redis, processes } = fleet();
    // Info level: the workers' `followup:regrant` lines are counted below.
    const env = fleet().env({ REDIS_DURABILITY: 'fsync!', LOG_LEVEL: 'info' });
    const nodeOfShard = await Promise.all(
      fleet()
        .shards()
        .map((s) => nodeOfSlot(cluster, keySlot(s.prefix))),
    );
    // Traffic for the shards of masters 0 and 1 only: master 2 must see no WAITAOF at all.
    const projects = fleet()
      .evenProjects(12, 'd')
      .filter((p) => nodeOfShard[shardOf(p, SHARDS)] !== 2);
    expect(projects.length).toBeGreaterThan(0);

    const metricsPort = await freePort();
    const roles = [
      ...startRoles('worker', 1, { ...env, METRICS_PORT: String(metricsPort) }),
      ...startRoles('worker', 1, env),
      ...startRoles('poller', 1, env),
    ];
    processes.push(...roles);
    for (const shard of fleet().shards())
      await waitForWorkers({ redis, prefix: shard.prefix }, 2, { processes });
    // The worker's start-up probe asked every master: each keeps the promise by WAITAOF.
    const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
    expect(await ready.json()).toMatchObject({
      status: 'ready',
      durability: 'waitaof',
      checks: { 'auth:shard 0': 'ok', 'auth:shard 5': 'ok' },
    });
    await resetCommandStats(cluster);

    const inputs = grid(simulator(), projects.length, JOBS, ROUNDS).map((input) => ({
      ...input,
      projectId: projects[Number(input.projectId.slice(1))] ?? input.projectId,
    }));
    for (const p of projects) for (let j = 0; j < JOBS; j++) simulator().seedJob(p, `j${j}`);
    const producer = createProducer({
      redisUrl: cluster.url,
      prefix: fleet().prefix,
      shards: SHARDS,
      cluster: true,
      durability: { mode: 'fsync', replicas: 0, strict: true },
    });
    const results = await producer.sendMany(inputs).finally(() => producer.close());
    expect(results.every((r) => !r.deduplicated)).toBe(true);
    await eventually(
      async () => {
        const lengths = await Promise.all(
          fleet()
            .shards()
            .map((s) => redis.xlen(s.eventsStream)),
        );
        return lengths.reduce((a, b) => a + b, 0) >= inputs.length ? true : undefined;
      },
      { timeoutMs: 120_000, what: `${inputs.length} events on the shards' streams` },
    );

    const deliveries = simulator().deliveries;
    expect(deliveries.map((d) => d.prompt).sort()).toEqual(inputs.map((i) => i.prompt).sort());
    expect(duplicates(deliveries.map((d) => d.prompt))).toEqual([]);
    for (const p of projects)
      for (let j = 0; j < JOBS; j++) expect(roundsOf(deliveries, p, `j${j}`)).toEqual([1, 2, 3]);

    // Per master, the waits its shards' follow-ups asked for: the producer's MULTI (one per shard
    // of the batch), ACQUIRE's go and MARK_SENT (one each per follow-up) and FINISH's hand-on
    // (each round but the last of each agent job). Writes of one shard asked for in the same turn
    // of a process's event loop go in one script call, and one WAITAOF covers them all: a master
    // sees at most that many, and at least one per shard of its own (the producer's).
    const most = [0, 0, 0];
    const least = [0, 0, 0];
    const shardsUsed = new Set(projects.map((p) => shardOf(p, SHARDS)));
    for (const s of shardsUsed) {
      most[nodeOfShard[s] ?? 0]! += 1;
      least[nodeOfShard[s] ?? 0]! += 1;
    }
    for (const p of projects) {
      const node = nodeOfShard[shardOf(p, SHARDS)] ?? 0;
      most[node]! += JOBS * ROUNDS * 2 + JOBS * (ROUNDS - 1);
    }
    // A grant given back unwritten (a worker that stalled past the budget's margin, as on a loaded
    // machine) adds two waits: its REQUEUE's and its next ACQUIRE's.
    for (const role of roles)
      for (const line of logLines(role.output.stdout))
        if (line['msg'] === LIFECYCLE.followupRegrant)
          most[nodeOfShard[shardOf(String(line['projectId']), SHARDS)] ?? 0]! += 2;
    const calls = await callsPerNode(cluster, 'waitaof');
    console.log(
      `WAITAOF calls per master: ${calls.join(', ')} (at least ${least.join(', ')}, at most ${most.join(', ')})`,
    );
    expect(calls[2]).toBe(0);
    for (const node of [0, 1]) {
      expect(calls[node]).toBeGreaterThanOrEqual(least[node]!);
      expect(calls[node]).toBeLessThanOrEqual(most[node]!);
    }

    await stopAll(processes.splice(0));
    const logs = roles.map((r) => r.output.stdout + r.output.stderr).join('\n');
    expect(logs).not.toMatch(/CROSSSLOT|not-durable|redis:not-durable/);
  }, 180_000);

  it('goes by the weakest master at start: one master without AOF puts the fleet at risk', async () => {
    const { cluster, redis } = fleet();
    const fsync = { mode: 'fsync', replicas: 0, strict: false } as const;
    const facts = await probeServer(redis);
    expect(facts).toMatchObject({ waitaof: true, appendonly: 'yes', appendfsync: 'always' });
    expect(assessDurability(fsync, facts).mode).toBe('waitaof');
    const node = new Redis(cluster.nodes[1]?.url ?? '');
    try {
      await node.config('SET', 'appendonly', 'no');
      await node.config('SET', 'appendfsync', 'everysec');
      const weakened = await probeServer(redis);
      expect(weakened).toMatchObject({ appendonly: 'no', appendfsync: 'everysec' });
      expect(assessDurability(fsync, weakened)).toMatchObject({
        mode: 'at-risk',
        warning: expect.stringContaining('appendonly no'),
      });
    } finally {
      await node.config('SET', 'appendfsync', 'always');
      await node.config('SET', 'appendonly', 'yes');
      // Turning AOF on starts a rewrite in a forked child: let it end before the cluster stops.
      await eventually(
        async () =>
          /aof_rewrite_in_progress:0[\s\S]*aof_rewrite_scheduled:0/.test(
            await node.info('persistence'),
          )
            ? true
            : undefined,
        { what: 'the AOF rewrite after appendonly yes' },
      );
      node.disconnect();
    }
  });
});
