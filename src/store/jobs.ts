import { hash, randomInt } from 'node:crypto';
import { Job, type JobJson, type JobsOptions, type Queue } from 'bullmq';
import { z } from 'zod';
import { identifier } from '../dispatch/followup.js';
import type { DispatchRef } from './store.js';
import { TRACEPARENT } from '../telemetry/trace-context.js';

/**
 * The BullMQ job that carries a dispatch to a worker. Its payload holds ids only: the prompt and
 * everything else live in the dispatch record, so nothing large or sensitive sits in BullMQ's
 * hashes or the dashboard.
 *
 * The payload is `{"p": projectId, "j": jobId}`, with `"d": dispatchId` only when the BullMQ job
 * id is not the dispatch id (a resend's or a repair's job) and `"t": traceparent` for a traced
 * follow-up. Short keys keep every field of a job hash within Redis's `hash-max-listpack-value`
 * (64 bytes) while the two ids take at most 49 bytes together (as JSON), so Redis keeps the hash
 * as a listpack. A payload with other fields was written by something else: it is not read.
 */
const payload = z.strictObject({
  // Checked as the producer checks them, before ACQUIRE spends anything on the job: the ids go
  // into keys and the URL of the POST.
  p: identifier,
  j: identifier,
  /** The dispatch id; the BullMQ job's id when absent. */
  d: z.string().min(1).optional(),
  /** The follow-up's trace context (also in its record), so a worker's span joins its trace. */
  // A malformed one is dropped, never a reason to refuse the job.
  t: z.string().regex(TRACEPARENT).optional().catch(undefined),
});

/** What a dispatch's BullMQ job holds as its `data`. */
export type DispatchJobData = z.input<typeof payload>;

/** What a worker reads from a dispatch's BullMQ job: which dispatch, and its trace context. */
export interface DispatchJobRef extends DispatchRef {
  readonly traceparent?: string | undefined;
}

/** The payload of the BullMQ job `bullJobId` that carries dispatch `ref`. */
export function dispatchJobPayload(ref: DispatchJobRef, bullJobId: string): DispatchJobData {
  const data: DispatchJobData = { p: ref.projectId, j: ref.jobId };
  if (bullJobId !== ref.dispatchId) data.d = ref.dispatchId;
  if (ref.traceparent) data.t = ref.traceparent;
  return data;
}

/**
 * Reads the dispatch a BullMQ job carries; `undefined` when its payload cannot be read (a poison
 * job).
 */
export function readDispatchJob(job: {
  readonly id?: string | undefined;
  readonly data: unknown;
}): DispatchJobRef | undefined {
  const read = payload.safeParse(job.data);
  const dispatchId = read.data?.d ?? job.id;
  if (!read.success || !dispatchId) return undefined;
  return { dispatchId, projectId: read.data.p, jobId: read.data.j, traceparent: read.data.t };
}

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

/** BullMQ job name of a dispatch (shown on the dashboard). */
export const DISPATCH_JOB_NAME = 'followup';

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

/**
 * Retries of transient failures (5xx, not connected) wait `base × 2^(n-1)` ms; 429s and budget
 * waits park the job without spending an attempt. `base` is drawn per job from 500 to 1,000 ms:
 * a fleet's retries after an outage spread over the same range as with BullMQ's `jitter: 0.5`,
 * and the options stay within 64 bytes (see the payload above), which `jitter` would not.
 */
function backoffBaseMs(): number {
  return 500 + Math.floor(Math.random() * 501);
}

/**
 * The job options of one dispatch. Its id, the dispatch id (so adding it twice is a no-op), is
 * not among them: the producer hands it to BullMQ beside them, so that it is not stored again in
 * every job's options; `queue.add` takes it among them (`addDispatchJob`).
 */
export function dispatchJobOptions(attempts: number, baseMs = backoffBaseMs()): JobsOptions {
  return { attempts, backoff: { type: 'exponential', delay: baseMs } };
}

/**
 * The BullMQ job of a dispatch as BullMQ's `addJobToTransaction` takes it: what `asJSON()` of a
 * new `Job` with these options answers (test/producer/job-json.redis.test.ts compares them),
 * built directly: a `Job` instance per follow-up would cost the producer more than the add.
 */
export function dispatchJobJson(
  ref: DispatchJobRef,
  opts: JobsOptions,
  timestamp = Date.now(),
): JobJson {
  return {
    id: ref.dispatchId,
    name: DISPATCH_JOB_NAME,
    data: JSON.stringify(dispatchJobPayload(ref, ref.dispatchId)),
    opts,
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
 * after an error whose outcome the producer never saw. Without one it is random (see
 * {@link randomDispatchId}).
 */
export function newDispatchId(key: string | undefined): string {
  if (key === undefined) return randomDispatchId();
  return `k-${hash('sha256', key).slice(0, 40)}`;
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const ID_LETTERS = 52;
const RANDOM_ID_CHARS = 22;

/**
 * A random dispatch id: 22 letters and digits, the first a letter (about 130 random bits, a
 * UUID has 122), so that it is never read as a number (BullMQ refuses a job id that is one) nor
 * as an option on a command line. Shorter than a UUID's 36 characters, since the id is in the
 * keys of its record, prompt and BullMQ job, in the wait list and in its lane.
 */
export function randomDispatchId(): string {
  // randomInt draws without bias, from a pool of random bytes Node keeps.
  let id = ID_ALPHABET[randomInt(ID_LETTERS)] as string;
  while (id.length < RANDOM_ID_CHARS) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)] as string;
  return id;
}

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
