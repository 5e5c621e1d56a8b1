import { createProducer } from '../../src/producer/index.js';
import { shardLayout } from '../../src/redis/keys.js';
import { connect } from '../../src/redis/connections.js';
import type { CliProcess } from '../../test/support/cli.js';
import { startLocalCluster, type LocalCluster } from '../../test/support/redis-cluster.js';
import { startRoles, stopAll, waitForWorkers } from '../../test/support/roles.js';
import type { BenchContext } from '../context.js';
import { errorLines, roleEnv } from '../fleet.js';
import { cpuMsOf, machineBusyMs } from '../probes.js';
import type { ScenarioRun } from '../report.js';
import { num, pct, repeated, runs } from '../stats.js';
import { benchSimulator, enqueueOurs, followUps, waitUntil } from '../workload.js';

/**
 * Scenario 8: sends per second on a Redis Cluster of 1, 2 and 3 masters (REDIS_CLUSTER=true,
 * DISPATCH_SHARDS=6), beside the same fleet on the bench's plain Redis with one shard, measured in
 * the same run. The cluster's nodes, the workers and the bench share this machine's 2 cores.
 */

const SHARDS = 6;
const WORKERS = 2;
const PROJECTS = 60;

/** Where a run's fleet keeps its state: the bench's plain Redis, or a cluster of `masters`. */
type Target = { kind: 'plain' } | { kind: 'cluster'; masters: number };

interface Run {
  readonly perSecond: number;
  /** CPU over the measured period (1 = one core): the workers together, the Redis nodes together. */
  readonly workersCores: number;
  readonly redisCores: number;
  readonly machineCores: number;
  readonly errors: readonly string[];
}

async function once(ctx: BenchContext, target: Target, n: number): Promise<Run> {
  const ns = await ctx.fresh('cluster');
  const cluster: LocalCluster | undefined =
    target.kind === 'cluster' ? await startLocalCluster(target.masters) : undefined;
  const simulator = await benchSimulator();
  const redisUrl = cluster?.url ?? ctx.redisUrl;
  const shards = cluster ? SHARDS : 1;
  const env = roleEnv(ctx, ns, simulator, {
    REDIS_URL: redisUrl,
    REDIS_CLUSTER: String(cluster !== undefined),
    REDIS_DURABILITY: 'none',
    DISPATCH_SHARDS: String(shards),
  });
  const client = connect({ redisUrl, redisCluster: cluster !== undefined }, 'worker', 'bench');
  let processes: CliProcess[] = [];
  const producer = createProducer({
    redisUrl,
    prefix: ns.prefix,
    shards,
    cluster: cluster !== undefined,
    durability: { mode: 'none' },
  });
  try {
    processes = startRoles('worker', WORKERS, env);
    for (const shard of shardLayout(ns.prefix, ns.eventsStream, shards, !!cluster))
      await waitForWorkers({ redis: client, prefix: shard.prefix }, WORKERS, {
        processes,
        timeoutMs: 60_000,
      });
    await enqueueOurs(producer, followUps(100, PROJECTS, 'warm'));
    await waitUntil(() => simulator.deliveries.length >= 100, 'the warm-up');
    const pids = processes.flatMap((p) => (p.child.pid ? [p.child.pid] : []));
    const redisPids = cluster ? cluster.nodes.flatMap((node) => node.pid() ?? []) : [ctx.redisPid];
    const cpu = () => ({
      workers: pids.reduce((sum, pid) => sum + cpuMsOf(pid), 0),
      redis: redisPids.reduce((sum, pid) => sum + cpuMsOf(pid), 0),
      machine: machineBusyMs(),
    });
    const before = cpu();
    const started = performance.now();
    await enqueueOurs(producer, followUps(n, PROJECTS));
    await waitUntil(() => simulator.deliveries.length >= n + 100, `${n} deliveries`);
    const elapsedMs = performance.now() - started;
    const after = cpu();
    await stopAll(processes);
    return {
      perSecond: (n * 1000) / elapsedMs,
      workersCores: (after.workers - before.workers) / elapsedMs,
      redisCores: (after.redis - before.redis) / elapsedMs,
      machineCores: (after.machine - before.machine) / elapsedMs,
      errors: errorLines(processes),
    };
  } finally {
    await stopAll(processes).catch(() => {});
    await producer.close();
    client.disconnect();
    await simulator.close();
    await cluster?.destroy();
  }
}

function label(target: Target): string {
  return target.kind === 'plain'
    ? 'plain Redis, 1 shard'
    : `cluster, ${target.masters} master${target.masters > 1 ? 's' : ''}, ${SHARDS} shards`;
}

/** The scenario's run (registered in run.ts). */
export const clusterScenario: ScenarioRun = async (ctx, n) => {
  const targets: Target[] = [
    { kind: 'plain' },
    { kind: 'cluster', masters: 1 },
    { kind: 'cluster', masters: 2 },
    { kind: 'cluster', masters: 3 },
  ];
  const measured: { target: Target; value: number; typical: Run; values: readonly number[] }[] = [];
  for (const target of targets) {
    const result = await repeated(
      ctx.repeats,
      async (r) => {
        const run = await once(ctx, target, n);
        ctx.progress(
          'cluster',
          `${label(target)} run ${r + 1}/${ctx.repeats}: ${num(run.perSecond)}/s` +
            (run.errors.length > 0 ? `; ERRORS: ${run.errors.join('; ')}` : ''),
        );
        return run;
      },
      (run) => run.perSecond,
      ctx.mayRepeat,
    );
    measured.push({
      target,
      value: result.median,
      typical: result.typical,
      values: result.values,
    });
  }
  const plain = measured[0]?.value ?? 1;
  const oneMaster = measured[1]?.value ?? 1;
  const rows = measured.map(({ target, value, typical }) => [
    label(target),
    num(value),
    num(value / plain, 2),
    num(value / oneMaster, 2),
    pct(typical.workersCores),
    pct(typical.redisCores),
    pct(typical.machineCores),
  ]);
  const scaling = measured.slice(1).map((m) => `${num(m.value)}/s`);
  return {
    title: 'Redis Cluster',
    summary:
      `sends/s with ${SHARDS} shards on 1, 2 and 3 masters: ${scaling.join(', ')} ` +
      `(plain Redis with 1 shard: ${num(plain)}/s). Every node, worker and the bench share 2 cores: ` +
      'read these as what the cluster path costs, not as how far more masters scale.',
    setup:
      `${num(n)} follow-ups, one per agent job, over ${PROJECTS} projects, enqueued in batches of ` +
      `100 while ${WORKERS} worker processes (concurrency 64, no budget wait, no poller) run; ` +
      'timed from the first enqueue to the last delivery, after 100 warm-up follow-ups. Each ' +
      'cluster is local (`redis-server --cluster-enabled yes`, no persistence, REDIS_DURABILITY=none) ' +
      `and fresh per run. Median of up to ${ctx.repeats} runs.`,
    tables: [
      {
        columns: [
          'Redis',
          'sends /s',
          '÷ plain',
          '÷ 1 master',
          'workers CPU',
          'Redis CPU',
          'machine busy',
        ],
        rows,
      },
    ],
    limitedBy: measured.map(
      ({ target, typical }) =>
        `${label(target)}: workers ${pct(typical.workersCores)} of a core together, Redis ` +
        `${pct(typical.redisCores)}, the machine ${pct(typical.machineCores)} (2 cores = 200 %)`,
    ),
    notes: [
      'More masters add Redis CPU but no core: on this 2-core machine every node, both workers and ' +
        'the bench share the same two cores, so a second or third master cannot raise the ' +
        'ceiling; the figures show what the cluster path costs (client-side slot routing, one ' +
        'MULTI per shard per batch), not how far it scales on separate machines.',
      ...measured.map(({ target, values }) => `${label(target)}: ${runs(values)}/s`),
    ],
  };
};
