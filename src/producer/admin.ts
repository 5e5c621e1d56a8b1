import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { parseRate, type Config, type Rate } from '../config/index.js';
import { budgetRate } from '../dispatch/budget.js';
import { connect } from '../redis/connections.js';
import { shardLayout, shardOf } from '../redis/keys.js';
import { within } from '../runtime/deadline.js';
import { wakeDispatch } from '../runtime/jobs.js';
import {
  cancelFollowUp,
  checkId,
  checkLimit,
  projectView,
  type CancelResult,
  type ProjectView,
} from './controls.js';
import { asRedisFailure, RedisUnavailableError } from './errors.js';
import { openShards } from './shards.js';
import { mergeOverviews, readOverview, type Overview, type OverviewOptions } from './overview.js';

/** Options of {@link createAdmin}; every default matches the service's settings. */
export interface AdminOptions {
  redisUrl: string;
  /** @defaultValue `agent-dispatch` */
  prefix?: string;
  /** `EVENTS_STREAM`, where a cancel's event goes. @defaultValue `agent-dispatch:events` */
  eventsStream?: string;
  /** `EVENTS_MAXLEN`. @defaultValue 1000000 */
  eventsMaxLen?: number;
  /** `DISPATCH_RETENTION` of a cancelled follow-up's record, in ms. @defaultValue 7 days */
  dispatchRetentionMs?: number;
  /** `SEND_RATE_LIMIT`, which `showProject` reports for a project without a limit of its own. */
  sendRateLimit?: string | Rate;
  /** An existing connection to use instead of `redisUrl` (not closed by `close`). */
  connection?: Redis;
  /** How long a call waits for Redis to be reachable before it fails. @defaultValue 5000 */
  readyTimeoutMs?: number;
  /** `DISPATCH_SHARDS`: a project's controls live in its shard. @defaultValue 1 */
  shards?: number;
  /** `REDIS_CLUSTER`: `redisUrl` is the seed node of a Redis Cluster. @defaultValue false */
  cluster?: boolean;
}

/** The answer of a pause or resume; `changed` is false when the project already was so. */
export interface PauseResult {
  readonly projectId: string;
  readonly paused: boolean;
  readonly changed: boolean;
  /** Follow-ups the resume woke (0 for a pause). */
  readonly woken: number;
}

/** The answer of a limit change: the limit now (`null`: `SEND_RATE_LIMIT`) and the one before. */
export interface LimitResult {
  readonly projectId: string;
  readonly limit: string | null;
  readonly previous: string | null;
}

/** Options of {@link Admin.setProjectLimit}. */
export interface LimitOptions {
  /** Sets a limit looser than `SEND_RATE_LIMIT` (the agent API's own) all the same. */
  readonly force?: boolean;
}

/**
 * The operator controls (contract, section 4). Each change is one atomic script that every
 * worker's next ACQUIRE reads, so it holds fleet-wide at once. Input errors throw
 * `InvalidControlError` naming the field (`projectId`, `limit`, `dispatchId`); an unknown project
 * is fine (a control may come before its follow-ups).
 */
export interface Admin {
  /** Stops every send to the project: no attempt, no budget spent; its follow-ups wait. */
  pauseProject(projectId: string): Promise<PauseResult>;
  /** Resumes the project and wakes its parked follow-ups at once. */
  resumeProject(projectId: string): Promise<PauseResult>;
  /**
   * Gives the project its own limit, `N/DURATION` (`50/1h`), in place of `SEND_RATE_LIMIT`: a
   * count of at least 1, a window of at most 24 h, and no looser than `SEND_RATE_LIMIT` (no
   * window of its length may hold more sends) unless `force` (see `checkLimit`).
   */
  setProjectLimit(projectId: string, limit: string, options?: LimitOptions): Promise<LimitResult>;
  /** Back to `SEND_RATE_LIMIT`. */
  clearProjectLimit(projectId: string): Promise<LimitResult>;
  /** Paused or not, its limit and budget use, its next slot, its 429 park, its counts. */
  showProject(projectId: string): Promise<ProjectView>;
  /** The contract's name of {@link Admin.showProject}. */
  project(projectId: string): Promise<ProjectView>;
  /** The projects with a pause or a limit of their own. */
  controlledProjects(): Promise<string[]>;
  /** Everything the operator's page shows at once (`/dashboard/followups`). */
  overview(options?: OverviewOptions): Promise<Overview>;
  /** `producer.cancel`: ends a queued follow-up `followup.cancelled`. */
  cancel(dispatchId: string): Promise<CancelResult>;
  close(): Promise<void>;
}

const DEFAULT_RATE: Rate = { max: 100, windowMs: 3_600_000 };

/** Creates the operator controls. Its connection fails fast, like the producer's. */
export function createAdmin(options: AdminOptions): Admin {
  const prefix = options.prefix ?? 'agent-dispatch';
  const defaultRate = rateOf(options.sendRateLimit);
  const cluster = options.cluster ?? false;
  const redis =
    options.connection ??
    connect({ redisUrl: options.redisUrl, redisCluster: cluster }, 'producer', 'admin');
  redis.on('error', () => {
    // Failures reach the caller as rejected calls.
  });
  const eventsStream = options.eventsStream ?? 'agent-dispatch:events';
  // Per shard its dispatch queue and store: a project's controls, budget and lanes are in its own.
  const layout = shardLayout(prefix, eventsStream, options.shards ?? 1, cluster);
  const shards = openShards(redis, layout, () => {}, {
    eventsMaxLen: options.eventsMaxLen ?? 1_000_000,
    retentionMs: options.dispatchRetentionMs ?? 7 * 86_400_000,
  }).map((s) => ({ queue: s.queue, store: s.store(redis) }));
  const first = shards[0] as (typeof shards)[number];
  const { queue } = first;
  const shardFor = (projectId: string) => shards[shardOf(projectId, shards.length)] ?? first;
  const readyTimeoutMs = options.readyTimeoutMs ?? 5_000;
  let closing: Promise<void> | undefined;

  /** Runs `call` once Redis is reachable (at most `readyTimeoutMs`), failures mapped. */
  async function run<T>(call: () => Promise<T>): Promise<T> {
    try {
      if (redis.status !== 'ready')
        await within(queue.waitUntilReady(), readyTimeoutMs, () => {
          throw new RedisUnavailableError(readyTimeoutMs);
        });
      return await call();
    } catch (err) {
      throw asRedisFailure(err, redis);
    }
  }

  async function setLimit(projectIdInput: string, limit: string | undefined, force = false) {
    const projectId = checkId('projectId', projectIdInput);
    const parsed = limit === undefined ? undefined : checkLimit(limit, defaultRate, force);
    const { previous } = await run(async () => {
      const rate = parsed && { text: parsed.text, rate: budgetRate(parsed.rate) };
      const { store, queue } = shardFor(projectId);
      const changed = await store.projects.setLimit(projectId, rate);
      // Follow-ups asleep until a slot of the old limit reserve one of the new limit now.
      await wakeAll(queue, changed.reservedBy);
      return changed;
    });
    return { projectId, limit: parsed?.text ?? null, previous: previous ?? null };
  }

  async function showProject(projectIdInput: string): Promise<ProjectView> {
    const projectId = checkId('projectId', projectIdInput);
    const { store } = shardFor(projectId);
    const state = await run(() => store.projects.show(projectId, budgetRate(defaultRate)));
    return projectView(state, defaultRate);
  }

  return {
    async pauseProject(projectIdInput) {
      const projectId = checkId('projectId', projectIdInput);
      const { changed } = await run(() => shardFor(projectId).store.projects.pause(projectId));
      return { projectId, paused: true, changed, woken: 0 };
    },
    async resumeProject(projectIdInput) {
      const projectId = checkId('projectId', projectIdInput);
      return run(async () => {
        const { store, queue } = shardFor(projectId);
        const { changed, parked } = await store.projects.resume(projectId);
        await wakeAll(queue, parked);
        return { projectId, paused: false, changed, woken: parked.length };
      });
    },
    setProjectLimit: (projectId, limit, limitOptions) =>
      setLimit(projectId, limit ?? '', limitOptions?.force === true),
    clearProjectLimit: (projectId) => setLimit(projectId, undefined),
    showProject,
    project: showProject,
    controlledProjects: () =>
      run(async () => {
        const each = await Promise.all(shards.map((s) => s.store.projects.controlled()));
        return each.flat().sort();
      }),
    overview: (overviewOptions) =>
      run(async () => {
        const parts = await Promise.all(
          shards.map((s) => readOverview(s.store, defaultRate, overviewOptions)),
        );
        return mergeOverviews(parts, overviewOptions);
      }),
    cancel: (dispatchIdInput) => {
      const dispatchId = checkId('dispatchId', dispatchIdInput);
      return run(async () => {
        // The id does not name its shard: the one that holds the record ends it.
        const found = await Promise.all(shards.map((s) => s.store.sends.get(dispatchId)));
        const shard =
          shards[
            Math.max(
              0,
              found.findIndex((r) => r !== undefined),
            )
          ] ?? first;
        return cancelFollowUp(shard, dispatchId);
      });
    },
    close() {
      closing ??= (async () => {
        await Promise.all(shards.map((s) => s.queue.close().catch(() => {})));
        if (!options.connection) redis.disconnect();
      })();
      return closing;
    },
  };
}

/** The controls of a process, from its config (`connection`: one of its own, left open). */
export function adminFor(config: Config, connection?: Redis): Admin {
  return createAdmin({
    redisUrl: config.redisUrl ?? '',
    ...(connection ? { connection } : {}),
    prefix: config.prefix,
    eventsStream: config.eventsStream,
    eventsMaxLen: config.eventsMaxLen,
    dispatchRetentionMs: config.dispatchRetentionMs,
    shards: config.shardCount,
    cluster: config.redisCluster,
    sendRateLimit: config.sendRateLimit,
  });
}

/** Wakes parked BullMQ jobs, 50 at a time. */
async function wakeAll(queue: Queue, bullJobIds: readonly string[]): Promise<void> {
  for (let i = 0; i < bullJobIds.length; i += 50)
    await Promise.all(bullJobIds.slice(i, i + 50).map((id) => wakeDispatch(queue, id)));
}

function rateOf(value: string | Rate | undefined): Rate {
  if (value === undefined) return DEFAULT_RATE;
  if (typeof value !== 'string') return value;
  const rate = parseRate(value);
  if (!rate)
    throw new RangeError(`sendRateLimit: expected N/DURATION such as 100/1h, got "${value}"`);
  return rate;
}
