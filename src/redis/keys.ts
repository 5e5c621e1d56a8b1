import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import { shardTag } from './slot.js';
/**
 * Every Redis key the service writes, built in one place behind the configurable prefix. BullMQ's
 * own keys sit under the same prefix, so one value moves everything (a test's, a `{hash-tag}`).
 */

/** BullMQ queue names, under the prefix. */
export const QUEUE_NAMES = {
  /** One BullMQ job per follow-up: the consumer sends it. */
  dispatch: 'dispatch',
  /** The poller's job scheduler ticks. */
  poll: 'poll',
} as const;

/**
 * Cap of each BullMQ queue's own events stream (`<prefix>:<queue>:events`). BullMQ writes it on
 * every add, start, finish and poll tick and cannot be told not to, but nothing reads it: the
 * completion events are ours (`EVENTS_STREAM`), the dashboard reads job states, and no role uses
 * `QueueEvents`. BullMQ's default keeps about 10,000 entries; this keeps about 100 (`XADD MAXLEN
 * ~`), and a `QueueEvents` tail still sees each event live. BullMQ stores the cap in the queue's
 * meta hash, so every `Queue` the service opens passes it (the last one to start wins).
 */
export const BULLMQ_EVENTS_MAX_LEN = 100;

/** The options of every BullMQ `Queue` the service opens, on `prefix`. */
export function queueOptions(prefix: string) {
  return { prefix, streams: { events: { maxLen: BULLMQ_EVENTS_MAX_LEN } } };
}

/** The key builder for one prefix. */
export interface Keys {
  readonly prefix: string;
  /** Hash: the dispatch record of one follow-up (the source of truth for its state). */
  dispatch(dispatchId: string): string;
  /**
   * String: the prompt of one follow-up, from REGISTER until FINISH. Kept apart from its record
   * so that the record's fields all stay short: Redis then stores the record as a compact
   * listpack instead of a hash table.
   */
  prompt(dispatchId: string): string;
  /**
   * Hash: a project's lanes of one follow-up (field: the agent job id; value: the dispatch id in
   * flight or next), each without a list of its own (see `store/includes/lane.lua`). Its key is
   * {@link Keys.laneHeadsPrefix} and the project's name in {@link Keys.laneProjects}.
   */
  laneHeads(projectId: string): string;
  /** What every {@link Keys.laneHeads} key starts with. */
  readonly laneHeadsPrefix: string;
  /**
   * Sorted set (every score 0, read by name): the projects whose lane heads may hold a lane of
   * one, each as its lane heads key without {@link Keys.laneHeadsPrefix}. REGISTER adds a project
   * when it makes a lane of one; the walk of the open dispatches (`store/openLanes-1.lua`) drops it
   * once its lane heads are empty.
   */
  readonly laneProjects: string;
  /**
   * List: the dispatch ids of one agent job with two or more follow-ups, in enqueue order; the
   * head, first, is the one in flight or next.
   */
  lane(projectId: string, jobId: string): string;
  /** Sorted set: the sliding-window send log of one project (score = send time in ms). */
  budget(projectId: string): string;
  /** Sorted set: the same log of one project's creations, with `BUDGET_SCOPE=split`. */
  createBudget(projectId: string): string;
  /** String: epoch ms until which a project is parked after the API answered 429. */
  park(projectId: string): string;
  /** Set: the BullMQ job ids waiting out a project's 429 park, woken by `project unpark`. */
  parkWaiters(projectId: string): string;
  /** String: marks that the orphan event of one BullMQ job was published. */
  orphan(bullJobId: string): string;
  /**
   * Hash, in the shard of the dispatch id ({@link claimShardOf}), not its project's: the claim of
   * an idempotency key across shards (`store/claims.ts`): `shard` (the project's shard that
   * may register it), `token` (the claim's), `at` (Redis ms).
   */
  idempotencyClaim(dispatchId: string): string;
  /**
   * Set, in a project's shard: the tokens of claims of this dispatch id released while no record
   * of it was here; REGISTER refuses a registration under any of them.
   */
  claimReleased(dispatchId: string): string;
  /** String: epoch ms until which a project's status reads are backed off (GET 429/5xx). */
  pollPark(projectId: string): string;
  /** String: a project's run history, `runs mean variance noise at` (see store/run-history.ts). */
  runs(projectId: string): string;
  /**
   * Hash: an operator's controls of one project, read by every ACQUIRE: `paused` (`1`) and
   * `pausedAt`; `limit` (as written, `50/1h`) with `max`, `windowMs` and `toleranceMs` (the
   * window as the budget counts it, margin included). Deleted when no control is left.
   */
  projectControls(projectId: string): string;
  /** Set: the BullMQ job ids parked by a project's pause, woken together by its resume. */
  projectPaused(projectId: string): string;
  /** Set: the projects that have a control (a pause or a limit), for the dashboard. */
  readonly controlledProjects: string;
  /** Sorted set: sent follow-ups being tracked, scored by the time their next status read is due. */
  readonly tracked: string;
  /**
   * Sorted set: the dispatches not finished yet that are not a lane of one (REGISTER adds those
   * in a lane of two or more, FINISH removes), scored by their enqueue time; a lane of one is
   * found through {@link Keys.laneProjects} instead. The poller's repair sweep walks both to find
   * queued dispatches whose BullMQ job vanished (see `store/open-index.ts`).
   */
  readonly open: string;
  /** The repair sweep's gate (a pass began within REPAIR_GRACE), pass, last pass: repair-state.ts */
  readonly repairGate: string;
  readonly repairPass: string;
  readonly repairLast: string;
  /** String: the lock that keeps poll ticks from overlapping across poller processes. */
  readonly pollLock: string;
  /** Hash: each project's open follow-ups by state (see `store/includes/open-counts.lua`). */
  readonly openCounts: string;
  /** Sorted set: the dead letters kept for a redrive, by end time (see `store/finish-n.lua`). */
  readonly deadLetters: string;
  /** Hash: counters of what the fleet did (sends by outcome, events by type...). */
  readonly counters: string;
  /**
   * Hash: present while the agent API rejects the key (401/403) or redirects (a wrong
   * `AGENT_API_URL`): every send of the fleet waits. Fields `since`, `httpStatus`, `probeAt`,
   * `backoffMs`, `maxBackoffMs`; never the key.
   */
  readonly authPause: string;
  /** Set: the BullMQ job ids parked by that pause, woken together when it ends. */
  readonly authPaused: string;
  /** Set: the role processes that beat here (`worker:<id>`), each alive while its key below is. */
  readonly alive: string;
  /** String, with a TTL each beat renews: one role process of {@link Keys.alive} is alive. */
  aliveProcess(member: string): string;
  /** A key of BullMQ's dispatch queue: `wait` (list), `delayed` (sorted set), or a job's id. */
  dispatchQueue(part: string): string;
}

/** Builds the {@link Keys} of one prefix. Ids are length-prefixed so no two pairs collide. */
export function keysFor(prefix: string): Keys {
  const k = (...parts: string[]) => [prefix, ...parts].join(':');
  return Object.freeze({
    prefix,
    dispatch: (dispatchId: string) => k('d', dispatchId),
    prompt: (dispatchId: string) => k('prompt', dispatchId),
    laneHeads: (projectId: string) => k('heads', `${projectId.length}.${projectId}`),
    laneHeadsPrefix: k('heads', ''),
    laneProjects: k('projects', 'lanes'),
    lane: (projectId: string, jobId: string) =>
      k('lane', `${projectId.length}.${projectId}`, jobId),
    budget: (projectId: string) => k('budget', projectId),
    createBudget: (projectId: string) => k('cbudget', projectId),
    park: (projectId: string) => k('park', projectId),
    parkWaiters: (projectId: string) => k('parkwait', `${projectId.length}.${projectId}`),
    pollPark: (projectId: string) => k('pollpark', projectId),
    runs: (projectId: string) => k('runs', `${projectId.length}.${projectId}`),
    projectControls: (projectId: string) => k('project', `${projectId.length}.${projectId}`),
    projectPaused: (projectId: string) =>
      k('project', `${projectId.length}.${projectId}`, 'parked'),
    controlledProjects: k('projects', 'controlled'),
    orphan: (bullJobId: string) => k('orphan', bullJobId),
    idempotencyClaim: (dispatchId: string) => k('claim', dispatchId),
    claimReleased: (dispatchId: string) => k('released', dispatchId),
    tracked: k('tracked'),
    open: k('open'),
    repairGate: k('repair', 'gate'),
    repairPass: k('repair', 'pass'),
    repairLast: k('repair', 'last'),
    pollLock: k('poll', 'lock'),
    openCounts: k('counts', 'open'),
    deadLetters: k('deadletters'),
    counters: k('counters'),
    authPause: k('authpause'),
    authPaused: k('authpause', 'parked'),
    alive: k('alive'),
    aliveProcess: (member: string) => k('alive', member),
    dispatchQueue: (part: string) => k(QUEUE_NAMES.dispatch, part),
  });
}

/**
 * One shard of the keyspace: its key prefix (the dispatch keys' and BullMQ's), its completion-event
 * stream, and its number. Every key of a shard carries the same hash tag, so each script and MULTI
 * of the shard stays in one Redis Cluster slot, and a cluster spreads the shards over its masters.
 */
export interface Shard {
  readonly index: number;
  readonly prefix: string;
  readonly eventsStream: string;
}

/**
 * One shard as the operator views read it (the dashboard, the queue gauges, `/readyz`): its
 * number, a name for people (`shard 3`), its keys and its BullMQ queues (none where nothing shows
 * them).
 */
export interface ShardView {
  readonly index: number;
  readonly name: string;
  readonly keys: Keys;
  readonly queues: readonly Queue[];
}

/** The base name of a prefix or stream without `{` `}`: a nested hash tag would put all in one. */
const bare = (name: string) => name.replace(/[{}]/g, '');

/**
 * The shards of a deployment. One shard on a single Redis uses the settings' names as they are
 * (`prefix`, `eventsStream`), so its keys read as configured. Otherwise (more than one shard, or a
 * cluster) shard `i` has prefix `{<tag>}` and stream `<eventsStream>:{<tag>}`, the braces of the
 * settings left out; `<tag>` is `<prefix>:<i>`, suffixed `.<k>` when needed to put its slot in the
 * `i`-th `count`th of the slot space (see slot.ts), so shards spread evenly over the masters.
 */
export function shardLayout(
  prefix: string,
  eventsStream: string,
  count: number,
  cluster: boolean,
): Shard[] {
  if (count === 1 && !cluster) return [{ index: 0, prefix, eventsStream }];
  return Array.from({ length: count }, (_, index) => {
    const tag = `{${shardTag(bare(prefix), index, count)}}`;
    return { index, prefix: tag, eventsStream: `${bare(eventsStream)}:${tag}` };
  });
}

/**
 * The shard of a project: the first 4 bytes of SHA-256(projectId), modulo the shard count. Stable
 * across processes, versions and languages, so every producer puts a project in the same shard.
 */
export function shardOf(projectId: string, count: number): number {
  if (count === 1) return 0;
  return createHash('sha256').update(projectId).digest().readUInt32BE(0) % count;
}

/**
 * The shard that holds the claim of a keyed dispatch id: a hash of the id itself, so that every
 * producer asks the same shard whatever the project, and claims spread like projects do.
 */
export function claimShardOf(dispatchId: string, count: number): number {
  return shardOf(dispatchId, count);
}

export {
  WEBHOOK_GROUP,
  WEBHOOK_QUEUE,
  webhookPendingKey,
  webhookSubscriptionsKey,
} from './webhook-keys.js';

/** String: the shard count the keyspace was last started with (`DISPATCH_SHARDS`). */
export function layoutKey(prefix: string): string {
  return `${bare(prefix)}:shards`;
}
