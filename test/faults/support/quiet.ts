import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { keysFor, QUEUE_NAMES } from '../../../src/redis/keys.js';
import { readEvents, type StreamEvent } from '../../support/events.js';
import { useOpened, type HookScope } from '../../support/hooks.js';
import { eventually, type Namespace } from '../../support/namespace.js';

/** Reads a namespace's state for assertions: its stream, its tracked set, its dispatch queue. */
export interface Probe {
  readonly redis: Redis;
  /** The namespace's key prefix. */
  readonly prefix: string;
  /**
   * The state of one dispatch job (`missing` when there is none); a delayed job's also with its
   * attempts made and when it falls due, so a stranded follow-up shows what it waits for.
   */
  jobState(jobId: string): Promise<string>;
  events(): Promise<StreamEvent[]>;
  /** Jobs still waiting, active or delayed in the dispatch queue. */
  pendingJobs(): Promise<number>;
  /** Finished dispatch jobs that a dead worker had been running (BullMQ moved them back once). */
  recoveredJobs(): Promise<number>;
  /** Poll ticks a dead poller left behind: failed, or still active for over 5 s. */
  orphanedTicks(): Promise<number>;
  /** Workers connected to a queue (`dispatch` for workers, `poll` for pollers). */
  workers(queue: 'dispatch' | 'poll'): Promise<number>;
  /**
   * Waits until at least `expected` events are out and nothing is in flight (no tracked dispatch,
   * no pending job), then reads the stream once more, so a late duplicate would be counted too.
   * On timeout it returns what is there with `quiet: false`: the drill's figures then show what
   * was lost, and its assertions fail on them.
   */
  settle(expected: number, timeoutMs: number): Promise<{ events: StreamEvent[]; quiet: boolean }>;
  close(): Promise<void>;
}

/** Opens a probe on `redisUrl` for the namespace `prefix` with its events `stream`. */
export function openProbe(redisUrl: string, prefix: string, stream: string): Probe {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  redis.on('error', () => {
    // A drill may restart Redis under the probe; commands wait for the reconnect.
  });
  const queueConnection = redis.duplicate();
  queueConnection.on('error', () => {});
  const queues = {
    dispatch: new Queue(QUEUE_NAMES.dispatch, { connection: queueConnection, prefix }),
    poll: new Queue(QUEUE_NAMES.poll, { connection: queueConnection, prefix }),
  };
  for (const q of Object.values(queues)) q.on('error', () => {});
  const keys = keysFor(prefix);
  const probe: Probe = {
    redis,
    prefix,
    async jobState(jobId) {
      const job = await queues.dispatch.getJob(jobId);
      if (!job) return 'missing';
      const state = await job.getState();
      if (state !== 'delayed') return state;
      // BullMQ scores a delayed job by its due time × 0x1000 plus a counter.
      const score = await redis.zscore(queues.dispatch.toKey('delayed'), jobId);
      const due =
        score === null
          ? 'no score'
          : `due in ${Math.floor(Number(score) / 0x1000) - Date.now()} ms`;
      return `delayed (attempts made ${job.attemptsMade}, ${due})`;
    },
    events: () => readEvents(redis, stream),
    async pendingJobs() {
      const counts = await queues.dispatch.getJobCounts('wait', 'active', 'delayed', 'prioritized');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    },
    async recoveredJobs() {
      const jobs = await queues.dispatch.getJobs(['completed', 'failed'], 0, -1);
      return jobs.filter((job) => job.stalledCounter > 0).length;
    },
    async orphanedTicks() {
      const failed = await queues.poll.getJobs(['failed'], 0, -1);
      const active = await queues.poll.getJobs(['active'], 0, -1);
      const old = active.filter((job) => (job.processedOn ?? Date.now()) < Date.now() - 5_000);
      return failed.length + old.length;
    },
    workers: (queue) => queues[queue].getWorkersCount(),
    async settle(expected, timeoutMs) {
      try {
        await eventually(
          async () => {
            const [count, tracked, pending] = await Promise.all([
              redis.xlen(stream),
              redis.zcard(keys.tracked),
              probe.pendingJobs(),
            ]);
            return count >= expected && tracked === 0 && pending === 0 ? true : undefined;
          },
          { timeoutMs, intervalMs: 250, what: `${expected} events and an idle namespace` },
        );
        return { events: await probe.events(), quiet: true };
      } catch {
        return { events: await probe.events(), quiet: false };
      }
    },
    async close() {
      await Promise.all(Object.values(queues).map((q) => q.close()));
      queueConnection.disconnect();
      redis.disconnect();
    },
  };
  return probe;
}

/**
 * A {@link Probe} on namespace `ns` (its prefix and stream, on `redisUrl`, the namespace's Redis
 * when unset), opened before each test (or once, `scope` `all`) and closed after. Register it
 * after the namespace, so that it closes first.
 */
export function useProbe(
  ns: () => Namespace,
  scope: HookScope,
  redisUrl: () => string = () => ns().redisUrl,
): () => Probe {
  return useOpened('probe', () => openProbe(redisUrl(), ns().prefix, ns().eventsStream), scope);
}

/** Waits until `count` processes of a role are connected to its queue. */
export async function waitForRole(
  probe: Probe,
  queue: 'dispatch' | 'poll',
  count: number,
  timeoutMs = 30_000,
): Promise<void> {
  await eventually(async () => ((await probe.workers(queue)) >= count ? true : undefined), {
    timeoutMs,
    intervalMs: 100,
    what: `${count} processes on the ${queue} queue`,
  });
}
