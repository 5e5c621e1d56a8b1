import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { createProducer, type Producer } from '../../src/producer/index.js';
import { parseHostPorts, sentinelAddress } from '../../src/config/redis-address.js';
import { connect } from '../../src/redis/connections.js';
import { readEvents } from './events.js';
import {
  drillInputs,
  failoverDrill,
  type FailoverDrillOptions,
  type FailoverResult,
} from './failover-drill.js';
import { SENTINEL_NAME, type LocalSentinel } from './redis-sentinel.js';
import { FAST_SETTINGS } from './service.js';
import { TEST_API_KEY } from './simulator.js';

/**
 * The fleets the failover drills (`failover-drill.ts`) run on: the role settings they share, and
 * the Sentinel fleet of the Sentinel test and the fault suite's Sentinel drill.
 */

/**
 * The role settings every fleet under a drill shares (the caller adds where Redis is): the
 * simulator as the agent API, events in `eventsStream`, quick stalls, and a send timeout a loaded
 * 2-core machine (role processes, Redis nodes, other suites) keeps: past FAST_SETTINGS' 2 s the
 * send would be unknown, and a quick run may end it `ambiguous`.
 */
export function drillSettings(simulatorUrl: string, eventsStream: string): Record<string, string> {
  return {
    ...FAST_SETTINGS,
    EVENTS_STREAM: eventsStream,
    AGENT_API_URL: simulatorUrl,
    AGENT_API_KEY: TEST_API_KEY,
    STALLED_TIMEOUT: '3s',
    SEND_TIMEOUT: '10s',
    SEND_RATE_LIMIT: '20/2s',
    // DRILL_LOG_LEVEL=info puts every follow-up's steps in the role logs (see DRILL_LOG_DIR).
    LOG_LEVEL: process.env['DRILL_LOG_LEVEL'] ?? 'warn',
  };
}

/** A fleet on a local Sentinel deployment with `REDIS_DURABILITY=replicas:1`, under a new prefix. */
export interface SentinelDrillFleet {
  readonly prefix: string;
  /** A connection through the sentinels, for the test's own reads. */
  readonly redis: Redis;
  /** A producer through the sentinels that waits for the replica, as the roles do. */
  readonly producer: Producer;
  /** The roles' settings. */
  readonly env: Record<string, string>;
  /** The events so far that carry `meta.prompt`, with that prompt (the drill's `promptEvents`). */
  promptEvents(): Promise<{ dispatchId: string; prompt: string }[]>;
  /** Closes the producer and the connection. */
  close(): Promise<void>;
}

/** Opens a {@link SentinelDrillFleet} on `deployment`, its prefix starting with `tag`. */
export function sentinelDrillFleet(
  deployment: LocalSentinel,
  tag: string,
  simulatorUrl: string,
): SentinelDrillFleet {
  const prefix = `${tag}-${randomBytes(4).toString('hex')}`;
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
    ...drillSettings(simulatorUrl, eventsStream),
    REDIS_SENTINELS: deployment.sentinels,
    REDIS_SENTINEL_NAME: SENTINEL_NAME,
    REDIS_DURABILITY: 'replicas:1',
    DISPATCH_PREFIX: prefix,
    REPAIR_GRACE: '5s',
  };
  const promptEvents = async () =>
    (await readEvents(redis, eventsStream)).flatMap((e) => {
      const prompt = (e.event['meta'] as { prompt?: string } | null)?.prompt;
      return prompt ? [{ dispatchId: e.dispatchId, prompt }] : [];
    });
  const close = async () => {
    await producer.close();
    redis.disconnect();
  };
  return { prefix, redis, producer, env, promptEvents, close };
}

/** What {@link shortDrill} leaves to its caller: the fleet and how to kill its primary. */
export type ShortDrillOptions = Omit<
  FailoverDrillOptions,
  'workers' | 'pollers' | 'inputs' | 'kills' | 'settleMs'
>;

/**
 * The drill of the cluster and Sentinel tests, sized for the plain suite: 2 workers and a
 * poller, `projects` x 2 agent jobs x 3 rounds, one kill, 90 s for the last wave to end.
 */
export function shortDrill(
  options: ShortDrillOptions,
  projects: readonly string[],
): Promise<FailoverResult> {
  return failoverDrill({
    ...options,
    workers: 2,
    pollers: 1,
    inputs: drillInputs(options.simulator, projects, 2, 3),
    kills: 1,
    settleMs: 90_000,
  });
}
