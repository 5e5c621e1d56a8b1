import { configRejectionStatus, isAgentApiError, statusKind } from '../agent-api/index.js';
import { agentJobOf } from '../dispatch/creation.js';
import { EVENT_TYPES } from '../dispatch/event.js';
import type { DispatchRecord } from '../dispatch/record.js';
import type { ObservedRun, RunStats } from '../store/run-history.js';
import { pauseSends, resumeSends } from '../runtime/auth-pause.js';
import { jitteredMs, jitteredWithin } from '../time/jitter.js';
import { addDispatchJob } from '../store/jobs.js';
import type { RoleContext } from '../runtime/role.js';
import { finishAndHandOn } from '../store/finish.js';
import type { Logger } from '../telemetry/logger.js';
import { errorCode } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { actionForRead, NO_JOB, withoutJob, type Action, type Observation } from './read-action.js';

/** One status read of a tick and what follows from it: reschedule, back off, resend or finish. */

/** What a tick needs, built once per poller process: the role's context. */
export type TickContext = RoleContext;

/** A status read that is over, and its action under way. */
export interface Polled {
  /** The action on what the read showed (a RESCHEDULE, a FINISH...): whether the dispatch ended. */
  readonly acted: Promise<boolean>;
}

/**
 * Reads one dispatch's job and decides what it shows (`runs`: its project's run history);
 * resolves once the read is over, with the action on it started, so that the caller can start
 * its next read meanwhile.
 */
export async function pollOne(
  ctx: TickContext,
  record: DispatchRecord,
  nowMs: number,
  pause: { on: boolean },
  runs?: RunStats,
): Promise<Polled> {
  const jobId = agentJobOf(record);
  if (jobId === '')
    return { acted: act(ctx, record, withoutJob(record, nowMs, ctx.config), NO_JOB) };
  const started = performance.now();
  let seen: Observation;
  try {
    seen = { kind: 'job', job: await ctx.api.getJob(record.projectId, jobId) };
    ctx.metrics.apiLatency.observe(
      { operation: 'get', outcome: 'ok' },
      (performance.now() - started) / 1000,
    );
  } catch (error) {
    seen = { kind: 'error', error };
    ctx.metrics.apiLatency.observe(
      { operation: 'get', outcome: errorCode(error) },
      (performance.now() - started) / 1000,
    );
  }
  await pauseOrResume(ctx, seen, pause);
  const action = actionForRead(record, seen, nowMs, ctx.config, runs);
  countRead(ctx, seen, action);
  const acted = act(ctx, record, action, seen);
  if (action.kind !== 'finish' || !RUN_ENDINGS.has(action.ending.type)) return { acted };
  const { type } = action.ending;
  return {
    acted: acted.then((finished) => {
      if (finished) observeRunEnd(ctx, record, nowMs, started, type);
      return finished;
    }),
  };
}

/** The endings of a run seen ended, whose event follows the run's end. */
const RUN_ENDINGS: ReadonlySet<string> = new Set([
  EVENT_TYPES.completed,
  EVENT_TYPES.failed,
  EVENT_TYPES.archived,
]);

/**
 * Observes the time from a run's end to its event. The API tells no end time: the end is taken as
 * the middle of the gap between the last read that saw the run active (else its send) and this
 * read, on the claims' clock (Redis's, as `activeAt` and `sentAt`); the event as this read's
 * claim plus the time from the read's start to FINISH's reply.
 */
function observeRunEnd(
  ctx: TickContext,
  record: DispatchRecord,
  nowMs: number,
  readStarted: number,
  type: string,
): void {
  const since = (record.seenActive ? record.activeAt : undefined) ?? record.sentAt;
  if (since === undefined || since > nowMs) return;
  const seconds = ((nowMs - since) / 2 + performance.now() - readStarted) / 1000;
  ctx.metrics.runEndToEvent.observe({ type }, seconds);
}

/** A read rejected for the key or the URL pauses every send; an answered read ends a pause. */
async function pauseOrResume(
  ctx: TickContext,
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

async function act(
  ctx: TickContext,
  record: DispatchRecord,
  action: Action,
  seen: Observation,
): Promise<boolean> {
  const log = ctx.logger.child({
    dispatchId: record.dispatchId,
    projectId: record.projectId,
    jobId: record.jobId,
  });
  switch (action.kind) {
    case 'reschedule':
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
      await ctx.store.tracking.reschedule(
        record.dispatchId,
        jitteredRead(ctx, action.delayMs),
        action.fields,
      );
      return false;
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
    case 'finish': {
      const { finished, found } = await finishAndHandOn(ctx, record, action.ending, record.state);
      if (finished && action.run !== undefined) await learnRun(ctx, record, action.run, log);
      if (finished) {
        log.info(
          { type: action.ending.type, reason: action.ending.reason },
          LIFECYCLE.followupFinished,
        );
      } else if (found !== undefined && found !== 'done') {
        // The record moved on after this read's snapshot (a late MARK_SENT turned `unsettled`
        // into `sent`): read it again soon, not at the end of the claim's lease.
        await ctx.store.tracking.reschedule(
          record.dispatchId,
          jitteredMs(ctx.config.pollMinIntervalMs),
        );
      }
      return finished;
    }
  }
}

/**
 * The operator opted in to resending what could not be settled: queue it again, as a new BullMQ
 * job whose id is fixed by the attempt, so adding it again (after a crash between the two steps,
 * the next tick does) is a no-op. The record stays tracked until a worker takes it.
 */
async function resend(ctx: TickContext, record: DispatchRecord, log: Logger): Promise<boolean> {
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
function jitteredRead(ctx: TickContext, waitMs: number): number {
  const { pollMinIntervalMs: min, pollMaxIntervalMs: max } = ctx.config;
  return Math.max(Math.min(min, waitMs), jitteredWithin(waitMs, max, min));
}

/**
 * Folds a finished run into its project's history. Once per follow-up: only the read whose FINISH
 * ended it gets here. A failure costs only this one run of the history, never the event.
 */
async function learnRun(
  ctx: TickContext,
  record: DispatchRecord,
  run: ObservedRun,
  log: Logger,
): Promise<void> {
  await ctx.store.poll.recordRun(record.projectId, run).catch((err: unknown) => {
    log.warn({ err }, LIFECYCLE.pollError);
  });
}

function countRead(ctx: TickContext, seen: Observation, action: Action): void {
  let outcome: string = statusKind(seen.kind === 'job' ? seen.job.status : undefined);
  if (seen.kind === 'error') outcome = action.kind === 'finish' ? 'not_found' : 'error';
  ctx.metrics.statusReads.inc({ outcome });
}
