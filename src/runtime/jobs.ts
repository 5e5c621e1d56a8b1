import { hash, randomUUID } from 'node:crypto';
import { Job, type JobJson, type JobsOptions, type Queue } from 'bullmq';
import { z } from 'zod';
import { identifier } from '../dispatch/followup.js';
import type { DispatchRef } from '../dispatch/store.js';
import { TRACEPARENT } from '../telemetry/tracing.js';

/**
 * The BullMQ job that carries a dispatch to a worker. Its payload holds ids only: the prompt and
 * everything else live in the dispatch record, so a job written by an older version still finds
 * the current truth, and nothing large or sensitive sits in BullMQ's hashes or the dashboard.
 * Unknown fields are ignored, so a worker of an older version reads a newer payload.
 */
export const dispatchJobSchema = z.object({
  v: z.literal(1),
  dispatchId: z.string().min(1),
  // Checked as the producer checks them, before ACQUIRE spends anything on the job: the ids go
  // into keys and the URL of the POST.
  projectId: identifier,
  jobId: identifier,
  /** The follow-up's trace context (also in its record), so a worker's span joins its trace. */
  // A malformed one is dropped, never a reason to refuse the job.
  traceparent: z.string().regex(TRACEPARENT).optional().catch(undefined),
});

export type DispatchJobData = z.infer<typeof dispatchJobSchema>;

/** BullMQ job name of a dispatch (shown on the dashboard). */
export const DISPATCH_JOB_NAME = 'followup';

/**
 * Retention of finished BullMQ jobs, set on the dispatch queue's Worker (BullMQ applies it to
 * every job that carries none of its own), so that each job's hash does not hold it: 75 bytes
 * less per job on the wire, 128 bytes less per queued job in Redis. Jobs added by an older version carry it
 * themselves, with the same values. Shorter than `DISPATCH_RETENTION` on purpose: while a
 * dispatch record exists, its BullMQ job id must not come back to life with a stale payload.
 * @defaultValue completed: 1 hour or the last 10 000; failed: 1 day.
 */
export const DISPATCH_JOB_RETENTION = {
  removeOnComplete: { age: 3_600, count: 10_000 },
  removeOnFail: { age: 86_400 },
} as const;

/**
 * The job options of one dispatch. Its id, the dispatch id (so adding it twice is a no-op), is
 * not among them: the producer hands it to BullMQ beside them, so that it is not stored again in
 * every job's options; `queue.add` takes it among them (`addDispatchJob`).
 */
export function dispatchJobOptions(attempts: number): JobsOptions {
  return {
    attempts,
    // Transient failures only (5xx, not connected); 429s and budget waits park the job without
    // spending an attempt. Jitter spreads a fleet's retries after an outage.
    backoff: { type: 'exponential', delay: 1_000, jitter: 0.5 },
  };
}

/**
 * The BullMQ job of a dispatch as BullMQ's `addJobToTransaction` takes it: what `asJSON()` of a
 * new `Job` with these options answers (test/producer/job-json.redis.test.ts compares them),
 * built directly, since a `Job` instance per follow-up cost the producer more than the add.
 */
export function dispatchJobJson(
  data: DispatchJobData,
  attempts: number,
  timestamp = Date.now(),
): JobJson {
  return {
    id: data.dispatchId,
    name: DISPATCH_JOB_NAME,
    data: JSON.stringify(data),
    opts: dispatchJobOptions(attempts),
    progress: 0,
    attemptsMade: 0,
    attemptsStarted: 0,
    stalledCounter: 0,
    timestamp,
    stacktrace: 'null',
    returnvalue: 'null',
    // `failedReason` too is left out, as `asJSON()` leaves it out of a job that never failed.
  } as JobJson;
}

/**
 * A new dispatch id. With an idempotency key it is derived from the key, so every producer that
 * sends the same key lands on the same record and the same BullMQ job id, even across a retry
 * after an error whose outcome the producer never saw.
 */
export function newDispatchId(key: string | undefined): string {
  if (key === undefined) return randomUUID();
  return `k-${hash('sha256', key).slice(0, 40)}`;
}

/** Adds the BullMQ job `bullJobId` that carries dispatch `ref` to a worker. */
export async function addDispatchJob(
  queue: Queue,
  ref: DispatchRef & { readonly traceparent?: string | undefined },
  bullJobId: string,
  attempts: number,
): Promise<void> {
  const data: DispatchJobData = {
    v: 1,
    dispatchId: ref.dispatchId,
    projectId: ref.projectId,
    jobId: ref.jobId,
    ...(ref.traceparent ? { traceparent: ref.traceparent } : {}),
  };
  await queue.add(DISPATCH_JOB_NAME, data, { ...dispatchJobOptions(attempts), jobId: bullJobId });
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
