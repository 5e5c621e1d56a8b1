import { AgentDispatchError } from '../agent-dispatch-error.js';
import type { Queue } from 'bullmq';
import type { DispatchJobData } from '../store/register.js';
import type { DispatchStore } from '../store/store.js';

/**
 * A send that would take a project's follow-ups not yet sent past `PROJECT_BACKLOG_MAX`: nothing
 * of its transaction was enqueued (the whole batch on one shard; see docs/operations.md for a
 * batch across shards). Code `backlog_full`. `retryAfterMs` estimates when the project's rate
 * limit will have drained enough of its backlog for the batch's part of it (at least 1 s).
 */
export class BacklogFullError extends AgentDispatchError {
  readonly code = 'backlog_full';
  constructor(
    readonly projectId: string,
    /** The project's queued follow-ups when the batch was refused. */
    readonly queued: number,
    /** The new follow-ups the batch had for that project. */
    readonly adding: number,
    readonly retryAfterMs: number,
  ) {
    super(
      `project ${projectId} has ${queued} follow-ups not yet sent; ${adding} more would go past ` +
        `PROJECT_BACKLOG_MAX: nothing was enqueued, retry in ${Math.ceil(retryAfterMs / 1000)} s`,
    );
    this.name = 'BacklogFullError';
  }
}

/**
 * The {@link BacklogFullError} of REGISTER's replies (see register-n.lua) when it refused the
 * batch; `undefined` when it did not. A later call of the batch refuses without details: the
 * first call's are taken.
 */
export function backlogRefusal(
  replies: readonly (readonly [Error | null, unknown])[],
): BacklogFullError | undefined {
  let refused = false;
  for (const [, reply] of replies) {
    if (!Array.isArray(reply) || reply[0] !== 'backlog_full') continue;
    refused = true;
    if (reply.length < 5) continue;
    const [, projectId, queued, adding, retryMs] = reply as [
      string,
      string,
      number,
      number,
      number,
    ];
    return new BacklogFullError(projectId, Number(queued), Number(adding), Number(retryMs));
  }
  return refused ? new BacklogFullError('', 0, 0, 1_000) : undefined;
}

/**
 * When a REGISTER call of a committed transaction failed (a key of the wrong type, written by
 * hand), the batch is refused, yet the MULTI's job adds ran: the ids without a record are marked
 * orphans (a worker that took one already ends it without an event) and their jobs removed, so
 * no job is left behind for a follow-up nobody accepted. Resolves to `replies` as they were: the
 * caller hears REGISTER's failure whether or not this went through.
 */
export async function withdrawRefused<R extends readonly [Error | null, unknown][]>(
  queue: Queue<DispatchJobData>,
  store: DispatchStore,
  { ids, loads, registers }: { ids: readonly string[]; loads: number; registers: number },
  replies: R,
): Promise<R> {
  if (!replies.slice(loads, loads + registers).some(([err]) => err)) return replies;
  try {
    const orphans = await store.tracking.markUnregistered(ids);
    await Promise.all(orphans.map((id) => queue.remove(id)));
  } catch {
    // Left as they were: a worker ends each `missing_record`, as before this withdrawal.
  }
  return replies;
}
