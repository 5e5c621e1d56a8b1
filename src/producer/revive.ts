import type { Queue } from 'bullmq';
import { addDispatchJob, freeCarryId, type DispatchJobData } from '../store/jobs.js';
import { REGISTER_CHUNK } from '../store/register.js';
import type { DispatchStore, Registration } from '../store/store.js';
import { withdrawRefused } from './backlog.js';

/** What {@link settleJobs} reads of a committed transaction (see `Transaction`, batch.ts). */
interface Committed {
  readonly ids: readonly string[];
  readonly registrations: readonly Registration[];
  readonly loads: number;
  readonly registers: number;
}

/**
 * After a committed transaction: withdraws the jobs of follow-ups whose REGISTER failed
 * (`withdrawRefused`, backlog.ts) and of those refused with their creation (-3), then gives a
 * live job to each new record whose id's job may have ended ({@link reviveEnded}).
 */
export async function settleJobs(
  queue: Queue<DispatchJobData>,
  store: DispatchStore,
  transaction: Committed,
  replies: readonly [Error | null, unknown][],
  attempts: number,
): Promise<void> {
  await withdrawRefused(queue, store, transaction, replies);
  await withdrawChained(queue, transaction, replies);
  // Registered whatever this does: if it fails, the repair sweep replaces the job later.
  await reviveEnded(queue, store, transaction, replies, attempts).catch(() => undefined);
}

/**
 * REGISTER answers -3 for a follow-up chained to a creation the same call refused: it registered
 * nothing and set the id's orphan marker, so its job is removed, for no worker to take it for a
 * job without a record. One a worker holds already stays (BullMQ refuses to remove a locked job)
 * and ends on the marker, without an event.
 */
async function withdrawChained(
  queue: Queue<DispatchJobData>,
  { ids, loads, registers }: Committed,
  replies: readonly [Error | null, unknown][],
): Promise<void> {
  const refused = replies
    .slice(loads, loads + registers)
    .flatMap(([err, answer], call) =>
      err || !Array.isArray(answer)
        ? []
        : answer.flatMap((a, i) => (a === -3 ? [ids[call * REGISTER_CHUNK + i] as string] : [])),
    );
  await Promise.all(refused.map((id) => queue.remove(id).catch(() => 0)));
}

/**
 * REGISTER answers 2 for a new record whose id had an orphan marker (see register-n.lua): an
 * earlier send of the same key was refused after its MULTI added the job, and a worker may have
 * ended that job already (without an event, seeing the marker). BullMQ keeps an ended job for a
 * while, so this send's add of the same id did nothing: without a job of its own the follow-up
 * would wait for the repair sweep (`REPAIR_GRACE`). So the job of each such id is looked at once:
 * an ended one is replaced at once as the sweep would (`<id>-f<n>`, carried on the record first),
 * a missing one is added again. A live one runs: a worker that took it before this record was
 * written runs it again when its orphan event finds the record (consumer/verdicts.ts).
 */
async function reviveEnded(
  queue: Queue<DispatchJobData>,
  store: DispatchStore,
  transaction: Committed,
  replies: readonly [Error | null, unknown][],
  attempts: number,
): Promise<void> {
  const { ids, registrations, loads, registers } = transaction;
  const calls = replies.slice(loads, loads + registers);
  // A refused batch (`backlog_full`, see register-n.lua) registered nothing: nothing to revive.
  if (calls.some(([, answer]) => isRefusal(answer))) return;
  // Each call answers its own chunk: a failed one is skipped, the positions of the next kept.
  const at = calls.flatMap(([err, answer], call) =>
    err || !Array.isArray(answer)
      ? []
      : answer.flatMap((a, i) => (a === 2 ? [call * REGISTER_CHUNK + i] : [])),
  );
  if (at.length === 0) return;
  const bullIds = at.map((i) => ids[i] as string);
  const presence = await store.poll.jobPresence(
    (name) => queue.toKey(name),
    bullIds,
    Number.MAX_SAFE_INTEGER,
  );
  for (const [k, i] of at.entries()) {
    const seen = presence[k];
    if (seen === 'live') continue;
    const dispatchId = ids[i] as string;
    const { projectId, jobId, traceparent } = registrations[i] as Registration;
    let bullJobId = dispatchId;
    if (seen === 'ended') {
      bullJobId = await freeCarryId(
        (carryIds) =>
          store.poll.jobPresence((name) => queue.toKey(name), carryIds, Number.MAX_SAFE_INTEGER),
        dispatchId,
      );
      if (!(await store.tracking.carry(dispatchId, dispatchId, bullJobId))) continue;
    }
    await addDispatchJob(queue, { dispatchId, projectId, jobId, traceparent }, bullJobId, attempts);
  }
}

/** Whether a REGISTER reply is a refusal of the batch (`backlog.ts`, `backlogRefusal`). */
function isRefusal(answer: unknown): boolean {
  return Array.isArray(answer) && answer[0] === 'backlog_full';
}
