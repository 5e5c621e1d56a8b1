import { Job, type Queue } from 'bullmq';
import {
  DISPATCH_JOB_NAME,
  dispatchJobOptions,
  dispatchJobPayload,
  type DispatchJobRef,
} from './register.js';

export type { DispatchJobData, DispatchJobRef } from './register.js';

/**
 * The BullMQ job that carries a dispatch to a worker, as the worker and the poller use it: the
 * ids its payload names, a resend's add, a lane's wake-up. The producer writes it with REGISTER
 * (`register.ts`: the payload, the options, the id); a worker reads it, checked, with
 * `readDispatchJob` (consumer/worker.ts). Its payload holds ids only: the prompt and everything
 * else live in the dispatch record, so nothing large or sensitive sits in BullMQ's hashes or the
 * dashboard.
 *
 * The payload is `{"p": projectId, "j": jobId}`, with `"d": dispatchId` only when the BullMQ job
 * id is not the dispatch id (a resend's or a repair's job) and `"t": traceparent` for a traced
 * follow-up. Short keys keep every field of a job hash within Redis's `hash-max-listpack-value`
 * (64 bytes) while the two ids take at most 49 bytes together (as JSON), so Redis keeps the hash
 * as a listpack.
 */

/**
 * The ids a job's payload names, read field by field, `''` for what it lacks: the event of a job
 * whose payload cannot be read carries what there is.
 */
export function claimedIds(job: { readonly id?: string | undefined; readonly data: unknown }): {
  dispatchId: string;
  projectId: string;
  jobId: string;
} {
  const data = (typeof job.data === 'object' && job.data !== null ? job.data : {}) as Record<
    string,
    unknown
  >;
  const text = (name: string) => {
    const value = data[name];
    return typeof value === 'string' ? value : '';
  };
  return { dispatchId: text('d') || (job.id ?? ''), projectId: text('p'), jobId: text('j') };
}

/**
 * Retention of finished BullMQ jobs, set on the dispatch queue's Worker (BullMQ applies it to
 * every job that carries none of its own), so that no job's hash holds it and no add sends it.
 * Shorter than `DISPATCH_RETENTION` on purpose: while a dispatch record exists, its BullMQ job id
 * must not come back to life with a stale payload.
 * @defaultValue completed: 1 hour or the last 10 000; failed: 1 day.
 */
export const DISPATCH_JOB_RETENTION = {
  removeOnComplete: { age: 3_600, count: 10_000 },
  removeOnFail: { age: 86_400 },
} as const;

/** Adds the BullMQ job `bullJobId` that carries dispatch `ref` to a worker. */
export async function addDispatchJob(
  queue: Queue,
  ref: DispatchJobRef,
  bullJobId: string,
  attempts: number,
): Promise<void> {
  await queue.add(DISPATCH_JOB_NAME, dispatchJobPayload(ref, bullJobId), {
    ...dispatchJobOptions(attempts),
    jobId: bullJobId,
  });
}

/**
 * Adds the BullMQ jobs of several dispatches (each `ref` with its job id `bullJobId`) in one
 * round trip (BullMQ's `addBulk`, a MULTI); an id that exists is left as it is, as with one add.
 */
export async function addDispatchJobs(
  queue: Queue,
  jobs: readonly { readonly ref: DispatchJobRef; readonly bullJobId: string }[],
  attempts: number,
): Promise<void> {
  if (jobs.length === 0) return;
  const opts = dispatchJobOptions(attempts);
  await queue.addBulk(
    jobs.map(({ ref, bullJobId }) => ({
      name: DISPATCH_JOB_NAME,
      data: dispatchJobPayload(ref, bullJobId),
      opts: { ...opts, jobId: bullJobId },
    })),
  );
}

/**
 * Wakes the BullMQ job of a dispatch that was parked waiting for its lane: the lane's previous
 * dispatch just ended. A job that is not delayed (not parked yet, or already running) is left
 * alone: the consumer checks the lane again right after parking, so no wake-up is lost between
 * the two (see `park` in the consumer).
 */
export async function wakeDispatch(queue: Queue, dispatchId: string): Promise<void> {
  const job = await Job.fromId(queue, dispatchId);
  if (!job || !(await job.isDelayed())) return;
  await job.promote().catch(() => {
    // It left the delayed set in between (promoted by its own re-check, or by its timer).
  });
}

/**
 * The first `<dispatchId>-f<n>`, from `first` on, with no BullMQ job: a carry job of an earlier
 * record of the same key may still be kept, and adding an existing id does nothing. `presence`
 * answers `missing` for an id with no job (store.poll.jobPresence); looked at eight at a time.
 * The producer's revival and the poller's repair sweep number carry jobs alike.
 */
export async function freeCarryId(
  presence: (bullJobIds: readonly string[]) => Promise<readonly string[]>,
  dispatchId: string,
  first = 1,
): Promise<string> {
  for (let from = first; ; from += 8) {
    const ids = Array.from({ length: 8 }, (_, k) => `${dispatchId}-f${from + k}`);
    const free = (await presence(ids)).indexOf('missing');
    if (free >= 0) return ids[free] as string;
  }
}
