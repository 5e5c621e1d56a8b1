import { configRejectionStatus, isAgentApiError, statusKind } from '../agent-api/index.js';
import type { DispatchRecord } from '../dispatch/record.js';
import { pauseSends, resumeSends } from '../runtime/auth-pause.js';
import type { RoleContext } from '../runtime/role.js';
import { addDispatchJob } from '../store/jobs.js';
import type { SeenRun } from '../store/run-history.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { jitteredMs, jitteredWithin } from '../time/jitter.js';
import type { Action, Observation } from './read-action.js';

/**
 * A status read that ends nothing: the follow-up stays tracked and is read again (a RESCHEDULE,
 * a backoff of its project's reads) or resent; and the pause of every send that a read rejected
 * for the key starts, or an answered read ends.
 */

/** Acts on a read whose action is not a FINISH; resolves to `false`: nothing ended. */
export async function keepTracking(
  ctx: RoleContext,
  record: DispatchRecord,
  action: Exclude<Action, { kind: 'finish' }>,
  seen: Observation,
  log: Logger,
): Promise<boolean> {
  switch (action.kind) {
    case 'reschedule': {
      if (
        seen.kind === 'job' &&
        statusKind(seen.job.status) === 'unknown' &&
        seen.job.status !== record.lastStatus
      ) {
        // Tolerated and logged once per change; the dispatch stays tracked.
        log.warn({ status: seen.job.status }, LIFECYCLE.followupUnknownStatus);
      }
      // Jittered within a small share of the wait (at most POLL_MIN_INTERVAL), earlier at
      // POLL_MAX_INTERVAL: reads scheduled together, as after a burst of sends, drift apart
      // instead of staying in step.
      const tracked = await ctx.store.tracking.reschedule(
        record.dispatchId,
        jitteredRead(ctx, action.delayMs),
        action.fields,
      );
      // Not when another poller ended it meanwhile: its end was told instead.
      if (tracked && action.overran) await learnRun(ctx, record, action.overran, log);
      return false;
    }
    case 'backoff': {
      await ctx.store.poll.parkPolls(record.projectId, action.delayMs);
      log.warn(
        { err: seen.kind === 'error' ? seen.error : undefined, delayMs: action.delayMs },
        LIFECYCLE.pollError,
      );
      await ctx.store.tracking.reschedule(record.dispatchId, jitteredMs(action.delayMs));
      return false;
    }
    case 'resend':
      return resend(ctx, record, log);
  }
}

/**
 * The operator opted in to resending what could not be settled: queue it again, as a new BullMQ
 * job whose id is fixed by the attempt, so adding it again (after a crash between the two steps,
 * the next tick does) is a no-op. The record stays tracked until a worker takes it.
 */
async function resend(ctx: RoleContext, record: DispatchRecord, log: Logger): Promise<boolean> {
  if (
    record.state === 'unsettled' &&
    typeof (await ctx.store.tracking.requeue(
      record,
      record.attempts,
      record.attemptToken ?? '',
      false,
    )) !== 'number'
  ) {
    return false;
  }
  const jobId = `${record.dispatchId}-r${record.attempts}`;
  // Named on the record first, so the repair sweep checks this job, not the first one.
  await ctx.store.tracking.carry(record.dispatchId, '', jobId);
  await addDispatchJob(ctx.queue, record, jobId, ctx.config.sendAttempts);
  // Jittered: the resends of an outage's unsettled sends are not all read again together.
  await ctx.store.tracking.reschedule(
    record.dispatchId,
    jitteredRead(ctx, ctx.config.pollMaxIntervalMs),
  );
  log.warn({ attempts: record.attempts }, LIFECYCLE.followupRetry);
  return false;
}

/** The wait before a read, jittered by at most POLL_MIN_INTERVAL, within the poll bounds. */
function jitteredRead(ctx: RoleContext, waitMs: number): number {
  const { pollMinIntervalMs: min, pollMaxIntervalMs: max } = ctx.config;
  return Math.max(Math.min(min, waitMs), jitteredWithin(waitMs, max, min));
}

/** A read rejected for the key or the URL pauses every send; an answered read ends a pause. */
export async function pauseOrResume(
  ctx: RoleContext,
  seen: Observation,
  pause: { on: boolean },
): Promise<void> {
  const rejected = seen.kind === 'error' ? configRejectionStatus(seen.error) : undefined;
  if (rejected !== undefined) {
    if (!pause.on) await pauseSends(ctx.store, rejected, ctx.logger);
    pause.on = true;
    return;
  }
  const answered =
    seen.kind === 'job' || (isAgentApiError(seen.error) && seen.error.httpStatus !== undefined);
  if (pause.on && answered) {
    pause.on = false;
    await resumeSends(ctx.store, ctx.queue, ctx.logger);
  }
}

/**
 * Folds a run into its project's history: a finished one (only the read whose FINISH ended it gets
 * here), or one gone on past where the history expected it to end (once, at the first read past
 * that). A failure costs only this one run of the history, never the event.
 */
export async function learnRun(
  ctx: RoleContext,
  record: DispatchRecord,
  run: SeenRun,
  log: Logger,
): Promise<void> {
  await ctx.store.poll.recordRun(record.projectId, run).catch((err: unknown) => {
    log.warn({ err }, LIFECYCLE.pollError);
  });
}
