import { isTerminalStatus, statusKind } from '../agent-api/index.js';
import { agentJobOf } from '../dispatch/creation.js';
import { EVENT_TYPES, eventTypeOf, type Ending } from '../dispatch/event.js';
import { STATES, type DispatchRecord } from '../dispatch/record.js';
import { observedRunMs, runBeyond, type RunStats } from '../store/run-history.js';
import type { RoleContext } from '../runtime/role.js';
import { finishAndHandOn } from '../store/finish.js';
import { jitteredMs } from '../time/jitter.js';
import { errorCode } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { firstPastWindow, nextDelayMs, planFor } from './learned-schedule.js';
import {
  afterFailedRead,
  NO_JOB,
  whileSending,
  withoutJob,
  type Action,
  type Observation,
  type ReadActionSettings,
} from './read-action.js';
import { keepTracking, learnRun, pauseOrResume } from './read-later.js';

/**
 * One status read of a tick and what follows from it: the GET of the follow-up's job, what it
 * shows (`actionForRead`), and the action. A read that ends the follow-up finishes it here; one
 * that keeps it tracked (read again, back off, resend) acts in `read-later.ts`; what a read means
 * for a send not settled yet is `read-action.ts`'s.
 */

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
  // An answered read changes no pause unless one is on; a failed one may start it.
  if (pause.on || seen.kind === 'error') await pauseOrResume(ctx, seen, pause);
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

/**
 * Decides what a status read means for a dispatch.
 *
 * The stale terminal status: a send is processed asynchronously, so right after it the job may
 * still show the previous run's `completed`. A terminal status therefore counts for this follow-up
 * only once the job was seen `active` after the send, or once `activeGraceMs` passed without ever
 * seeing it active (a run too quick to be caught between two reads). For a send whose delivery is
 * unknown (`unsettled`), "never seen active" means it was most likely never taken: it ends
 * undeliverable (`ambiguous`), or is resent when the operator chose so.
 *
 * `runs`: the project's run history, which shapes the reads of a `sent` follow-up (with
 * `POLL_LEARN`); a run seen ended precisely enough carries its length in the `finish`.
 */
export function actionForRead(
  record: DispatchRecord,
  seen: Observation,
  nowMs: number,
  s: ReadActionSettings,
  runs?: RunStats,
): Action {
  if (record.state === STATES.sending) return whileSending(record, seen, nowMs, s);
  const sinceSendMs = nowMs - (record.sentAt ?? record.enqueuedAt);
  const timedOut = sinceSendMs >= s.trackTimeoutMs;
  const timeout: Ending = { type: EVENT_TYPES.timedOut, reason: 'track_timeout' };
  const plan = s.pollLearn ? planFor(record, s, runs) : undefined;
  const next = nextDelayMs(record, sinceSendMs, s, plan);

  if (record.state === STATES.queued) {
    // Only a resend is tracked while queued: make sure its BullMQ job exists, then look later.
    return record.resendPending
      ? { kind: 'resend' }
      : { kind: 'reschedule', delayMs: next, fields: {} };
  }
  if (seen.kind === 'error')
    return afterFailedRead(seen.error, timedOut ? timeout : undefined, next, s);

  const { job } = seen;
  const status = job.status;
  const kind = statusKind(status);
  const fields = { job: JSON.stringify(job), lastStatus: status ?? '', polls: record.polls + 1 };
  if (isTerminalStatus(status)) {
    const ended: Action = { kind: 'finish', ending: { type: eventTypeOf(status), job } };
    if (record.seenActive) {
      const run = s.pollLearn ? observedRunMs(record, nowMs, s.pollMinIntervalMs, runs) : undefined;
      return run === undefined ? ended : { ...ended, run };
    }
    if (sinceSendMs >= s.activeGraceMs) {
      if (record.state === STATES.sent) return ended;
      if (s.ambiguousResend) return { kind: 'resend' };
      return {
        kind: 'finish',
        ending: { type: EVENT_TYPES.undeliverable, reason: 'ambiguous', job },
      };
    }
    // Within the grace period: read again soon, to catch the run while it is active.
    return {
      kind: 'reschedule',
      delayMs: s.pollMinIntervalMs,
      fields: { ...fields, pollDelayMs: s.pollMinIntervalMs },
    };
  }
  if (timedOut) return { kind: 'finish', ending: { ...timeout, job } };
  if (kind === 'active') {
    const overran =
      runs && firstPastWindow(record, sinceSendMs, plan)
        ? { ...runBeyond(sinceSendMs, runs), atMs: nowMs, going: true }
        : undefined;
    return {
      kind: 'reschedule',
      delayMs: next,
      fields: {
        ...fields,
        ...{ seenActive: '1', activeAt: nowMs, state: STATES.sent, pollDelayMs: next },
        ...(overran && { overran: record.sentAt ?? '' }),
      },
      ...(overran && { overran }),
    };
  }
  // An unknown status is tolerated: keep reading, as for an active run.
  return { kind: 'reschedule', delayMs: next, fields: { ...fields, pollDelayMs: next } };
}

/** Acts on a read: a FINISH here, the actions that keep it tracked in `read-later.ts`. */
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
  if (action.kind !== 'finish') return keepTracking(ctx, record, action, seen, log);
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

function countRead(ctx: TickContext, seen: Observation, action: Action): void {
  let outcome: string = statusKind(seen.kind === 'job' ? seen.job.status : undefined);
  if (seen.kind === 'error') outcome = action.kind === 'finish' ? 'not_found' : 'error';
  ctx.metrics.statusReads.inc({ outcome });
}
