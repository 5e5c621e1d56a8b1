import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { parseHostPorts, sentinelAddress } from '../../src/redis/address.js';
import { connect } from '../../src/redis/connections.js';
import type { CliProcess } from '../support/cli.js';
import { readEvents } from '../support/events.js';
import { drillInputs, failoverDrill } from '../support/failover-drill.js';
import {
  killPrimary,
  SENTINEL_NAME,
  startLocalSentinel,
  type LocalSentinel,
} from '../support/redis-sentinel.js';
import { stopAll, waitForWorkers } from '../support/roles.js';
import { FAST_SETTINGS } from '../support/service.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

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

  it('loses and repeats nothing when the primary is killed and the sentinels promote the replica', async () => {
    const deployment = sentinel as LocalSentinel;
    const prefix = `t-sentinel-${randomBytes(4).toString('hex')}`;
    const eventsStream = `${prefix}:events`;
    const address = sentinelAddress(parseHostPorts(deployment.sentinels), SENTINEL_NAME);
    const redis = connect(address, 'worker', 'test');
    redis.on('error', () => {});
    const producer = createProducer({
      redisUrl: address,
      prefix,
      durability: { mode: 'fsync', replicas: 1, strict: false },
    });
    const env = {
      ...FAST_SETTINGS,
      REDIS_SENTINELS: deployment.sentinels,
      REDIS_SENTINEL_NAME: SENTINEL_NAME,
      REDIS_DURABILITY: 'replicas:1',
      DISPATCH_PREFIX: prefix,
      EVENTS_STREAM: eventsStream,
      AGENT_API_URL: simulator().url,
      AGENT_API_KEY: TEST_API_KEY,
      STALLED_TIMEOUT: '3s',
      SEND_TIMEOUT: '10s',
      SEND_RATE_LIMIT: '20/2s',
      REPAIR_GRACE: '5s',
      LOG_LEVEL: 'warn',
    };
    try {
      const projects = Array.from({ length: 12 }, (_, i) => `s${i}`);
      const result = await failoverDrill({
        env,
        workers: 2,
        pollers: 1,
        processes,
        producer,
        simulator: simulator(),
        inputs: drillInputs(simulator(), projects, 2, 3),
        kills: 1,
        waitForRoles: () => waitForWorkers({ redis, prefix }, 2, { processes }),
        kill: () => killPrimary(deployment, false),
        promptEvents: async () =>
          (await readEvents(redis, eventsStream)).flatMap((e) => {
            const prompt = (e.event['meta'] as { prompt?: string } | null)?.prompt;
            return prompt ? [{ dispatchId: e.dispatchId, prompt }] : [];
          }),
        settleMs: 90_000,
      });
      console.log(
        `sentinel failover: ${result.refused.length} refused; ${result.lost.length} of ${result.enqueued} follow-ups without an event ` +
          `(${result.lostAfterSend.length} of them sent), ${result.duplicateSends.length} sent twice, ` +
          `${result.duplicateEvents.length} with two events; replica promoted in ${result.failoverMs.join(', ')} ms`,
      );
      expect(result.refused).toEqual([]);
      expect(result.lost).toEqual([]);
      expect(result.duplicateSends).toEqual([]);
      expect(result.duplicateEvents).toEqual([]);
    } finally {
      await producer.close();
      redis.disconnect();
    }
  }, 240_000);
});
