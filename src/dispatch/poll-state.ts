import { redisNow, type StoreState } from './store-state.js';

/**
 * The poller's own state in the store: the lock that keeps poll ticks from overlapping across
 * pollers, where the repair sweep's pass stands, and whether the BullMQ jobs of open dispatches
 * still exist. Reached through {@link DispatchStore}.
 */

/** Where a dispatch's BullMQ job is: waiting/delayed/active, ended, or gone. */
export type JobPresence = 'live' | 'ended' | 'missing';

/** BullMQ's key of the dispatch queue for a name (`Queue.toKey`). */
export type QueueKey = (name: string) => string;

export async function takePollLock(
  state: StoreState,
  token: string,
  lockMs: number,
): Promise<boolean> {
  return (await state.redis.set(state.keys.pollLock, token, 'PX', lockMs, 'NX')) === 'OK';
}

export async function renewPollLock(
  state: StoreState,
  token: string,
  lockMs: number,
): Promise<boolean> {
  return (await state.scripts.run('renewLock', [state.keys.pollLock], [token, lockMs])) === 1;
}

export async function releasePollLock(state: StoreState, token: string): Promise<boolean> {
  return (await state.scripts.run('releaseLock', [state.keys.pollLock], [token])) === 1;
}

export async function startRepairPass(
  state: StoreState,
  graceMs: number,
): Promise<{ rank: number; nowMs: number } | undefined> {
  const { redis, keys } = state;
  const cursor = await redis.get(keys.repairCursor);
  if (cursor === null && (await redis.set(keys.repairGate, '1', 'PX', graceMs, 'NX')) !== 'OK')
    return undefined;
  return { rank: Number(cursor ?? 0), nowMs: await redisNow(state) };
}

export async function moveRepairCursor(
  state: StoreState,
  rank: number | undefined,
  graceMs: number,
): Promise<void> {
  const { redis, keys } = state;
  if (rank === undefined) await redis.del(keys.repairCursor);
  else await redis.set(keys.repairCursor, rank, 'PX', 10 * graceMs);
}

export async function jobPresence(
  state: StoreState,
  queueKey: QueueKey,
  bullJobIds: readonly string[],
  endedBy: number,
): Promise<JobPresence[]> {
  if (bullJobIds.length === 0) return [];
  const pipeline = state.redis.pipeline();
  for (const bullJobId of bullJobIds) {
    pipeline.exists(queueKey(bullJobId));
    pipeline.zscore(queueKey('completed'), bullJobId);
    pipeline.zscore(queueKey('failed'), bullJobId);
  }
  const replies = (await pipeline.exec()) ?? [];
  return bullJobIds.map((_, i) => {
    const [exists, completed, failed] = [0, 1, 2].map((k) => {
      const [err, value] = replies[3 * i + k] ?? [new Error('no reply'), null];
      if (err) throw err;
      return value;
    });
    if (exists !== 1) return 'missing';
    const endedAt = Number(completed ?? failed ?? Infinity);
    return endedAt <= endedBy ? 'ended' : 'live';
  });
}
