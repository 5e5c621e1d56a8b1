import { createHash, randomUUID } from 'node:crypto';
import type { JobsOptions } from 'bullmq';
import { z } from 'zod';

/**
 * The BullMQ job that carries a dispatch to a worker. Its payload holds ids only: the prompt and
 * everything else live in the dispatch record, so a job written by an older version still finds
 * the current truth, and nothing large or sensitive sits in BullMQ's hashes or the dashboard.
 */
export const dispatchJobSchema = z.object({
  v: z.literal(1),
  dispatchId: z.string().min(1),
  projectId: z.string().min(1),
  jobId: z.string().min(1),
});

export type DispatchJobData = z.infer<typeof dispatchJobSchema>;

/** BullMQ job name of a dispatch (shown on the dashboard). */
export const DISPATCH_JOB_NAME = 'followup';

/**
 * Retention of finished BullMQ jobs. Shorter than `DISPATCH_RETENTION` on purpose: while a
 * dispatch record exists, its BullMQ job id must not come back to life with a stale payload.
 * @defaultValue completed: 1 hour or the last 10 000; failed: 1 day.
 */
const KEEP = {
  completed: { age: 3_600, count: 10_000 },
  failed: { age: 86_400 },
} as const;

/** The job options of one dispatch: its id is the dispatch id, so adding it twice is a no-op. */
export function dispatchJobOptions(dispatchId: string, attempts: number): JobsOptions {
  return {
    jobId: dispatchId,
    attempts,
    // Transient failures only (5xx, not connected); 429s and budget waits park the job without
    // spending an attempt. Jitter spreads a fleet's retries after an outage.
    backoff: { type: 'exponential', delay: 1_000, jitter: 0.5 },
    removeOnComplete: KEEP.completed,
    removeOnFail: KEEP.failed,
  };
}

/**
 * A new dispatch id. With an idempotency key it is derived from the key, so every producer that
 * sends the same key lands on the same record and the same BullMQ job id, even across a retry
 * after an error whose outcome the producer never saw.
 */
export function newDispatchId(key: string | undefined): string {
  if (key === undefined) return randomUUID();
  return `k-${createHash('sha256').update(key).digest('hex').slice(0, 40)}`;
}
