import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliProcess } from '../support/cli.js';
import { sentinelDrillFleet, shortDrill } from '../support/drill-fleet.js';
import { killPrimary, startLocalSentinel, type LocalSentinel } from '../support/redis-sentinel.js';
import { stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

describe('Redis Sentinel: a Valkey primary, a replica, 3 sentinels; REDIS_DURABILITY=replicas:1', () => {
  const simulator = useSimulator({ workTimeMs: 100, sendLimit: { max: 20, windowMs: 2_000 } });
  let sentinel: LocalSentinel | undefined;
  const processes: CliProcess[] = [];
  beforeAll(async () => {
    sentinel = await startLocalSentinel(1);
  }, 60_000);
  afterAll(async () => {
    try {
      await stopAll(processes.splice(0));
    } finally {
      await sentinel?.destroy();
    }
  });

  it(
    'loses and repeats nothing when the primary is killed and the sentinels promote the replica',
    { timeout: 240_000 },
    async () => {
      const deployment = sentinel as LocalSentinel;
      const { prefix, redis, producer, env, promptEvents, close } = sentinelDrillFleet(
        deployment,
        't-sentinel',
        simulator().url,
      );
      try {
        const projects = Array.from({ length: 12 }, (_, i) => `s${i}`);
        const result = await shortDrill(
          {
            env,
            processes,
            producer,
            simulator: simulator(),
            waitForRoles: () => waitForWorkers({ redis, prefix }, 2, { processes }),
            kill: () => killPrimary(deployment, false),
            promptEvents,
          },
          projects,
        );
        console.log(
          `sentinel failover: ${result.refused.length} refused; ${result.lost.length} of ${result.enqueued} follow-ups without an event ` +
            `(${result.lostAfterSend.length} of them sent), ${result.duplicateSends.length} sent twice, ` +
            `${result.duplicateEvents.length} with two events; replica promoted in ${result.failoverMs.join(', ')} ms`,
        );
        expect(result.refused, result.refusedBecause.join('; ')).toEqual([]);
        expect(result.lost).toEqual([]);
        expect(result.duplicateSends).toEqual([]);
        expect(result.duplicateEvents).toEqual([]);
      } finally {
        await close();
      }
    },
  );
});
