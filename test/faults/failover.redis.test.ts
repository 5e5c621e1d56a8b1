import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import type { CliProcess } from '../support/cli.js';
import { masterAndReplicas, waitForFailover } from '../support/cluster-failover.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { sentinelDrillFleet } from '../support/drill-fleet.js';
import { drillInputs, failoverDrill, type FailoverResult } from '../support/failover-drill.js';
import {
  killPrimary,
  startLocalSentinel,
  waitUntil,
  type LocalSentinel,
} from '../support/redis-sentinel.js';
import { stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { SCALE } from './support/scale.js';

const { followUps, kills } = SCALE.failover;
const SIMULATOR = { workTimeMs: 100, sendLimit: { max: 20, windowMs: 2_000 } };
/** 20 projects x 2 agent jobs x rounds: `followUps` in all. */
const PROJECTS = 20;
const ROUNDS = Math.ceil(followUps / (PROJECTS * 2));

/** Records a drill's figures, then asserts on them. */
function judge(
  ctx: Parameters<typeof recordFigures>[0],
  scenario: string,
  r: FailoverResult,
  ms: number,
) {
  recordFigures(ctx, {
    category: 3,
    scenario,
    tried: r.enqueued + r.refused.length,
    faults: `${r.failoverMs.length} primary SIGKILLs, each replica promoted (${r.failoverMs.join(', ')} ms)`,
    lost: r.lost.length + r.refused.length,
    duplicated: r.duplicateSends.length + r.duplicateEvents.length,
    leaked: 0,
    notes: [
      `refused by the producer after 30 s of retries ${r.refused.length}${r.refusedBecause.length > 0 ? ` (${r.refusedBecause.join('; ')})` : ''}; accepted without an event ${r.lost.length} (${r.lostAfterSend.length} of them sent)`,
      `prompts sent twice ${r.duplicateSends.length}; follow-ups with two events ${r.duplicateEvents.length}; no role restarted`,
    ],
    durationMs: ms,
  });
  expect(r.refused, r.refusedBecause.join('; ')).toEqual([]);
  expect(r.lost).toEqual([]);
  expect(r.duplicateSends).toEqual([]);
  expect(r.duplicateEvents).toEqual([]);
}

/** Waits until the node on `port` is a replica in sync with its master. */
function inSync(port: number): Promise<number> {
  return waitUntil(async () => {
    const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    try {
      const role = (await client.call('ROLE')) as unknown[];
      return role[0] === 'slave' && role[3] === 'connected';
    } finally {
      client.disconnect();
    }
  }, `node ${port} back as a replica in sync`);
}

describe('3. Failover: a Valkey cluster of 3 masters + 3 replicas, REDIS_DURABILITY=replicas:1', () => {
  const simulator = useSimulator(SIMULATOR);
  const fleet = useClusterFleet(simulator, {
    masters: 3,
    shards: 6,
    persistence: { server: 'valkey', appendonly: 'yes', appendfsync: 'always', replicas: 1 },
  });

  it('a master SIGKILLed again and again: every follow-up ends once, none sent twice', async (ctx) => {
    const watch = stopwatch();
    const { cluster, redis, processes } = fleet();
    const producer = createProducer({
      redisUrl: cluster.url,
      prefix: fleet().prefix,
      shards: 6,
      cluster: true,
      durability: { mode: 'fsync', replicas: 1, strict: false },
    });
    // The first kill hits the master REDIS_URL names; each later one the pair's master now.
    let pair = await masterAndReplicas(cluster, cluster.url);
    try {
      const result = await failoverDrill({
        env: fleet().env({ REDIS_DURABILITY: 'replicas:1', REPAIR_GRACE: '5s' }),
        workers: 3,
        pollers: 2,
        processes,
        producer,
        simulator: simulator(),
        inputs: drillInputs(simulator(), fleet().evenProjects(PROJECTS, 'f'), 2, ROUNDS),
        kills,
        waitForRoles: async () => {
          for (const shard of fleet().shards())
            await waitForWorkers({ redis, prefix: shard.prefix }, 3, {
              processes,
              timeoutMs: 90_000,
            });
        },
        kill: async () => {
          const { master, replicas } = pair;
          await master.stop('SIGKILL');
          const { ms, promoted } = await waitForFailover(cluster, replicas);
          await master.restart();
          await inSync(master.port);
          pair = { master: promoted, replicas: [master] };
          return ms;
        },
        promptEvents: () => fleet().promptEvents(),
      });
      judge(
        ctx,
        `${followUps} follow-ups to ${PROJECTS * 2} agent jobs; 3 workers and 2 pollers (processes, never restarted) seeded with one master's URL; Valkey cluster 3+3, AOF appendfsync always, automatic failover (cluster-node-timeout 2 s), the killed node restarted as a replica after each`,
        result,
        watch(),
      );
    } finally {
      await producer.close();
    }
  });
});

describe('3. Failover: Redis Sentinel, a Valkey primary + 1 replica, 3 sentinels, REDIS_DURABILITY=replicas:1', () => {
  const simulator = useSimulator(SIMULATOR);
  let sentinel: LocalSentinel | undefined;
  const processes: CliProcess[] = [];
  beforeAll(async () => {
    sentinel = await startLocalSentinel(1);
  });
  afterAll(async () => {
    try {
      await stopAll(processes.splice(0));
    } finally {
      await sentinel?.destroy();
    }
  });

  it('the primary SIGKILLed again and again: every follow-up ends once, none sent twice', async (ctx) => {
    const watch = stopwatch();
    const deployment = sentinel as LocalSentinel;
    const { prefix, redis, producer, env, promptEvents, close } = sentinelDrillFleet(
      deployment,
      'f-sentinel',
      simulator().url,
    );
    try {
      const result = await failoverDrill({
        env,
        workers: 3,
        pollers: 2,
        processes,
        producer,
        simulator: simulator(),
        inputs: drillInputs(
          simulator(),
          Array.from({ length: PROJECTS }, (_, i) => `s${i}`),
          2,
          ROUNDS,
        ),
        kills,
        waitForRoles: () => waitForWorkers({ redis, prefix }, 3, { processes, timeoutMs: 90_000 }),
        kill: () => killPrimary(deployment, true),
        promptEvents,
      });
      judge(
        ctx,
        `${followUps} follow-ups to ${PROJECTS * 2} agent jobs; 3 workers and 2 pollers (processes, never restarted) with REDIS_SENTINELS; Valkey primary + replica, AOF appendfsync always, 3 sentinels (down-after-milliseconds 1 s), the killed node restarted as a replica after each`,
        result,
        watch(),
      );
    } finally {
      await close();
    }
  });
});
