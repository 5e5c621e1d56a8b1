import type { Redis } from 'ioredis';
import { DispatchStore } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';

/**
 * The dispatch ids of one agent job's lane in namespace `prefix`, its head first: a lane of one is
 * a field of the project's lane heads, a lane of two or more a list, head first.
 */
export async function laneIds(
  redis: Redis,
  prefix: string,
  projectId: string,
  jobId: string,
): Promise<string[]> {
  const keys = keysFor(prefix);
  const [head, behind] = await Promise.all([
    redis.hget(keys.laneHeads(projectId), jobId),
    redis.lrange(keys.lane(projectId, jobId), 0, -1),
  ]);
  return head === null ? behind : [head, ...behind];
}

/**
 * Where one follow-up of the namespace `prefix` is, for a failing drill or test to say what it
 * waited on: `<record state>/<BullMQ job state>`, with `, head` when it heads its lane and
 * `, not in lane` when its lane does not name it, then `, untracked` or when its status read
 * falls due. `jobState` reads the state of the dispatch's current BullMQ job (the caller's queue).
 */
export async function whereIs(
  redis: Redis,
  prefix: string,
  dispatchId: string,
  jobState: (bullJobId: string) => Promise<string>,
): Promise<string> {
  const keys = keysFor(prefix);
  const [state, projectId, jobId, bullJobId] = await redis.hmget(
    keys.dispatch(dispatchId),
    'state',
    'projectId',
    'jobId',
    'bullJobId',
  );
  // A job re-added by the repair sweep or resent by the poller has an id of its own, on the record.
  const job = await jobState(bullJobId || dispatchId);
  const due = await redis.zscore(keys.tracked, dispatchId);
  const tracked = due === null ? ', untracked' : `, due in ${Number(due) - Date.now()} ms`;
  let lane = '';
  if (projectId && jobId) {
    const ids = await laneIds(redis, prefix, projectId, jobId);
    lane = ids[0] === dispatchId ? ', head' : ids.includes(dispatchId) ? '' : ', not in lane';
  }
  return `${state ?? 'gone'}/${job}${lane}${tracked}`;
}

/**
 * The open dispatches of namespace `prefix` (not finished yet), as the repair sweep walks them:
 * `count` as a change of shard count reads it, `ids` as a walk finds them.
 */
export async function openDispatches(
  redis: Redis,
  prefix: string,
): Promise<{ count: number; ids: string[] }> {
  const store = new DispatchStore(redis, keysFor(prefix), {
    eventsStream: '',
    eventsMaxLen: 0,
    retentionMs: 0,
  });
  const { dispatches } = await store.open.first(Number.MAX_SAFE_INTEGER);
  return { count: await store.open.count(), ids: dispatches.map((d) => d.dispatchId) };
}
