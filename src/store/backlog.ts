import type { StoreState } from './store-state.js';

/** A project a batch would take past `PROJECT_BACKLOG_MAX`, as REGISTER refuses it. */
export interface BacklogOver {
  readonly projectId: string;
  readonly queued: number;
  readonly adding: number;
  readonly retryMs: number;
}

/**
 * REGISTER's backlog check (see includes/backlog.lua) read before the transaction, so that the
 * usual refusal adds no BullMQ job for a worker to end. It counts only the follow-ups without an
 * idempotency key, surely new (a keyed one may be a resend of one queued, which adds nothing):
 * it never refuses what REGISTER would take, and REGISTER's check is the one that holds.
 */
export async function backlogOver(
  state: StoreState,
  followUps: readonly { readonly projectId: string; readonly key?: string }[],
): Promise<BacklogOver | undefined> {
  const backlog = state.options.backlog;
  if (!backlog) return undefined;
  const adding = new Map<string, number>();
  for (const { projectId, key } of followUps)
    if (key === undefined) adding.set(projectId, (adding.get(projectId) ?? 0) + 1);
  if (adding.size === 0) return undefined;
  const projects = [...adding.keys()];
  const { keys } = state;
  const counts = await state.redis.hmget(keys.openCounts, ...projects.map((p) => `q:${p}`));
  for (const [i, projectId] of projects.entries()) {
    const queued = Number(counts[i] ?? 0);
    const over = queued + (adding.get(projectId) ?? 0) - backlog.max;
    if (over <= 0) continue;
    const own = await state.redis.hmget(keys.projectControls(projectId), 'max', 'windowMs');
    const max = Number(own[0] ?? backlog.rate.max);
    const windowMs = Number(own[1] ?? backlog.rate.windowMs);
    const retryMs = Math.max(1_000, Math.ceil((over * windowMs) / max));
    return { projectId, queued, adding: adding.get(projectId) ?? 0, retryMs };
  }
  return undefined;
}
