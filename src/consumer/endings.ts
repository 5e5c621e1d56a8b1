import { DelayedError, type Job } from 'bullmq';
import { EVENT_TYPES } from '../dispatch/event.js';
import type { DispatchRef } from '../store/store.js';
import { claimedIds, wakeDispatch } from '../store/jobs.js';
import type { RoleContext } from '../runtime/role.js';
import { endDispatch } from '../store/finish.js';
import { LIFECYCLE } from '../telemetry/names.js';

/**
 * How a processor run ends when it does not send: parked (lane, budget, 429), undeliverable, or
 * poison; and how a job BullMQ failed for good ends. Each keeps the record and the events right
 * whatever BullMQ does next with the job.
 */

/**
 * Parks a job until `untilMs` without spending an attempt. For a lane wait (`ref` given), looks at
 * the lane once more after parking: if it freed in between, nobody else will wake this job.
 */
export async function park(
  ctx: RoleContext,
  job: Job,
  token: string | undefined,
  untilMs: number,
  ref?: DispatchRef,
): Promise<never> {
  return parkUnless(ctx, job, token, untilMs, ref && (() => ctx.store.sends.isNext(ref)));
}

/**
 * Parks a job while its project is paused, noted so that the resume wakes it at once; `untilMs`
 * only bounds a lost wake-up. A resume between ACQUIRE and the note took the set before the job
 * was in it, so the pause is looked at once more after parking.
 */
export async function parkPaused(
  ctx: RoleContext,
  job: Job,
  token: string | undefined,
  untilMs: number,
  ref: DispatchRef,
): Promise<never> {
  if (job.id) await ctx.store.projects.noteParked(ref.projectId, job.id);
  return parkUnless(ctx, job, token, untilMs, async () => {
    return !(await ctx.store.projects.isPaused(ref.projectId));
  });
}

/**
 * Parks a job while its project's 429 park lasts, noted so that `project unpark` wakes it at once;
 * `untilMs` is when it looks again by itself. An unpark between the note and the park took the
 * set before the job was delayed, so the park is looked at once more after parking.
 */
export async function parkRateLimited(
  ctx: RoleContext,
  job: Job,
  token: string | undefined,
  untilMs: number,
  ref: DispatchRef,
): Promise<never> {
  if (job.id) await ctx.store.projects.noteParkWaiter(ref.projectId, job.id, untilMs);
  return parkUnless(ctx, job, token, untilMs, async () => {
    return !(await ctx.store.projects.isParked(ref.projectId));
  });
}

/** Parks a job until `untilMs`; wakes it at once when `freed` says its wait ended meanwhile. */
async function parkUnless(
  ctx: RoleContext,
  job: Job,
  token: string | undefined,
  untilMs: number,
  freed?: () => Promise<boolean>,
): Promise<never> {
  await job.moveToDelayed(untilMs, token);
  if (freed && job.id && (await freed())) await wakeDispatch(ctx.queue, job.id);
  throw new DelayedError();
}

/** Ends a dispatch undeliverable (from `expected` state) and wakes its lane's next one. */
export async function endUndeliverable(
  ctx: RoleContext,
  ref: DispatchRef,
  reason: string,
  expected: 'sending' | 'queued',
): Promise<string> {
  const record = await ctx.store.sends.get(ref.dispatchId);
  if (!record) return 'gone';
  await endDispatch(ctx, record, { type: EVENT_TYPES.undeliverable, reason }, expected);
  return `undeliverable: ${reason}`;
}

/**
 * Ends a queued dispatch whose deadline passed `followup.expired`, and wakes its lane's next one.
 * One queued again for an approved resend may have reached the API already: "expired" would say
 * it was never sent, so it ends as it would have without the resend, undeliverable (`ambiguous`).
 */
export async function endExpired(ctx: RoleContext, ref: DispatchRef): Promise<string> {
  const record = await ctx.store.sends.get(ref.dispatchId);
  if (!record) return 'gone';
  if (record.resendPending) return endUndeliverable(ctx, ref, 'ambiguous', 'queued');
  await endDispatch(ctx, record, { type: EVENT_TYPES.expired }, 'queued');
  return 'expired';
}

/**
 * A job whose payload cannot be read (something other than a producer wrote it). Its dispatch,
 * when there is one, ends undeliverable; the job completes, so it cannot loop.
 */
export async function poison(ctx: RoleContext, job: Job, reason: string): Promise<string> {
  const ids = claimedIds(job);
  const record = ids.dispatchId ? await ctx.store.sends.get(ids.dispatchId) : undefined;
  if (!record) return publishOrphan(ctx, job, reason);
  ctx.logger.error({ bullJobId: job.id, reason }, LIFECYCLE.followupPoison);
  if (record.state !== 'queued' && record.state !== 'sending')
    return `poison: ${reason}, ${record.state}`;
  return endUndeliverable(ctx, record, reason, record.state);
}

/**
 * ACQUIRE found no record for this job. A record read now was registered since (a send of the
 * same key retried after a refusal): it is never ended here. 'rerun' when it is queued and this
 * job is its job; otherwise the orphan event goes out as for a poison payload.
 */
export async function missingRecord(ctx: RoleContext, job: Job): Promise<string> {
  const { dispatchId } = claimedIds(job);
  const record = dispatchId ? await ctx.store.sends.get(dispatchId) : undefined;
  if (!record) return publishOrphan(ctx, job, 'missing_record');
  const itsJob = job.id === record.dispatchId || job.id === record.bullJobId;
  if (record.state === 'queued' && itsJob) return 'rerun';
  ctx.logger.warn({ bullJobId: job.id, state: record.state }, LIFECYCLE.followupVanished);
  return `missing_record: record ${record.state}`;
}

/** The undeliverable event of a job with no record; 'record-exists' when one was registered since. */
async function publishOrphan(ctx: RoleContext, job: Job, reason: string): Promise<string> {
  // An empty id names nothing: fall back to the job's own id, so the orphan event still goes out.
  const ids = claimedIds(job);
  const dispatchId = ids.dispatchId;
  const bullJobId = job.id ?? dispatchId;
  if (!dispatchId || !bullJobId) {
    ctx.logger.error({ bullJobId, reason }, LIFECYCLE.followupPoison);
    return `poison: ${reason}`;
  }
  // Only for a job Redis still holds: one whose enqueue a Redis crash took back (this worker
  // took it just before) was never accepted, and its producer's retry registers it anew.
  const jobKey = ctx.queue.toKey(bullJobId);
  // When it headed a lane of two or more, its next follow-up may be parked, waiting for it.
  const published = await ctx.store.tracking.publishOrphan(
    { bullJobId, dispatchId, jobKey, projectId: ids.projectId, jobId: ids.jobId },
    ids,
    reason,
    (next) => wakeDispatch(ctx.queue, next),
  );
  if (published === 'job-gone' || published === 'record-exists') {
    ctx.logger.warn({ bullJobId, reason, published }, LIFECYCLE.followupVanished);
    return `${reason}: ${published}`;
  }
  ctx.logger.error({ bullJobId, reason }, LIFECYCLE.followupPoison);
  return `poison: ${reason}`;
}

/**
 * A BullMQ job failed. Most failures are retried by BullMQ; when this one is final (attempts
 * spent, or stalled too often), its dispatch must still end with one event. `ref`: what the
 * job's payload names (`readDispatchJob`).
 */
export async function onFailed(
  ctx: RoleContext,
  job: Job,
  ref: DispatchRef | undefined,
  err: Error,
): Promise<void> {
  const { store, logger } = ctx;
  try {
    if ((await job.getState()) !== 'failed') return;
    const record = ref && (await store.sends.get(ref.dispatchId));
    if (!record) return;
    if (record.state === 'sending') {
      // Its last attempt recorded an intent and no outcome: the prompt may have gone out. Marked
      // on that attempt's behalf (its token); the poller settles it from the job's status.
      logger.warn(
        { dispatchId: record.dispatchId, projectId: record.projectId, jobId: record.jobId },
        LIFECYCLE.followupAmbiguous,
      );
      await store.markSent(record, 'unsettled', undefined, 1_000, record.attemptToken ?? '');
      return;
    }
    if (record.state !== 'queued') return;
    const reason = `worker_failed:${err.name}`;
    await endDispatch(ctx, record, { type: EVENT_TYPES.undeliverable, reason }, 'queued');
  } catch (error) {
    logger.error({ err: error, dispatchId: ref?.dispatchId }, LIFECYCLE.followupEndFailed);
  }
}
