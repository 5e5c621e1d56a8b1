import type { Job } from 'bullmq';
import { isAgentApiError, type AgentJob } from '../agent-api/index.js';
import type { DispatchRef, MarkResult, WriteRetry } from '../store/store.js';
import { pauseSends, resumeSends } from '../runtime/auth-pause.js';
import { jitteredUntil } from '../time/jitter.js';
import { reportItemError } from '../runtime/store-item-error.js';
import type { RoleContext } from '../runtime/role.js';
import type { Logger } from '../telemetry/logger.js';
import { errorCode } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import type { ConcurrencyController } from './concurrency.js';
import { endUndeliverable, park, parkRateLimited } from './endings.js';
import { classifySendFailure } from './send-failure.js';
import { createdNoJob, endIfInDoubt, logFields, post } from './create.js';

/**
 * One send: the POST of an acquired follow-up, recording its answer, and what is done when it
 * fails (what a failure means is decided in `send-failure.ts`).
 */

/** What the worker's processor needs, built once per worker process. */
export interface SendContext extends RoleContext {
  readonly concurrency: ConcurrencyController;
  readonly workerId: string;
  /** 429s in a row per project, for the backoff of a 429 that names no wait. */
  readonly rateLimitStreak: Map<string, number>;
  /** How long a send's answer is retried while Redis fails it (`markSentRetryMs`). */
  readonly outcomeRetryMs: number;
}

/** One attempt to send: its number, and the token it holds the dispatch's intent with. */
export interface Attempt {
  readonly n: number;
  readonly token: string;
}

/** What ACQUIRE granted: the prompt, where it goes (`''`: a new job), the probe, the deadline. */
type Grant = { prompt: string; to: string; probe: boolean; writeBy?: number | undefined };

export async function sendFollowUp(
  ctx: SendContext,
  ref: DispatchRef,
  attempt: Attempt,
  { prompt, to, probe, writeBy }: Grant,
  job: Job,
  token: string | undefined,
): Promise<string> {
  // The probe of a paused fleet tries the key as the key file has it now.
  if (probe) ctx.refreshKey();
  const log = ctx.logger.child(logFields(ref, to));
  const started = performance.now();
  let agentJob: AgentJob;
  try {
    agentJob = await post(ctx, ref.projectId, to, prompt, writeBy);
  } catch (err) {
    ctx.metrics.apiLatency.observe(
      { operation: 'send', outcome: errorCode(err) },
      (performance.now() - started) / 1000,
    );
    return onFailure(ctx, ref, attempt, probe, { job, token }, err, log);
  }
  const latencyMs = performance.now() - started;
  ctx.metrics.apiLatency.observe({ operation: 'send', outcome: 'ok' }, latencyMs / 1000);
  ctx.concurrency.onAnswer(latencyMs);
  ctx.rateLimitStreak.delete(ref.projectId);
  if (createdNoJob(ref, agentJob))
    return endIfInDoubt(ctx, ref, 'no_job_id', log) as Promise<string>;
  // Outside the try above: a Redis error here is no failure of the send, which was delivered.
  await recordOutcome(ctx, ref, attempt, 'sent', agentJob, log);
  if (probe) await resumeSends(ctx.store, ctx.queue, log);
  ctx.metrics.sends.inc({ outcome: 'sent' });
  log.debug(
    { attempt: attempt.n, status: agentJob.status, latencyMs: Math.round(latencyMs) },
    LIFECYCLE.followupSent,
  );
  return 'sent';
}

/**
 * Records an attempt's outcome (MARK_SENT), retrying for a bounded time while Redis fails it:
 * a definite 200 is the only proof of delivery and is never dropped silently. If Redis still
 * fails, the record stays `sending` and the error is logged and thrown: this job's rerun marks
 * the send `unsettled` once no request can be in flight (`sendInFlightMs`), on this attempt's
 * behalf, and the poller, tracking it since the intent, settles it from the job's status.
 */
export async function recordOutcome(
  ctx: SendContext,
  ref: DispatchRef,
  attempt: Attempt,
  state: 'sent' | 'unsettled',
  agentJob: AgentJob | undefined,
  log: Logger,
): Promise<void> {
  let result: MarkResult;
  try {
    result = await ctx.store.markSent(
      ref,
      state,
      agentJob,
      ctx.config.pollMinIntervalMs,
      attempt.token,
      outcomeRetry(ctx, log, { state }),
    );
  } catch (err) {
    if (!reportItemError(ctx, err, ref))
      log.error(
        { err, attempt: attempt.n, state, status: agentJob?.status },
        LIFECYCLE.followupUnrecorded,
      );
    throw err;
  }
  // Another attempt holds the dispatch, or it ended meanwhile: this answer changes nothing.
  if (result !== 'marked')
    log.warn({ attempt: attempt.n, state, result }, LIFECYCLE.followupUnrecorded);
}

/** A send failed: what that means (`send-failure.ts`), and what is done about it. */
async function onFailure(
  ctx: SendContext,
  ref: DispatchRef,
  attempt: Attempt,
  probe: boolean,
  { job, token }: { job: Job; token: string | undefined },
  err: unknown,
  log: Logger,
): Promise<string> {
  const failure = classifySendFailure(err);
  // Any answer but a rejection shows the key and the URL work again.
  if (probe && failure.kind !== 'auth_paused' && isAgentApiError(err) && err.httpStatus)
    await resumeSends(ctx.store, ctx.queue, log);
  const inDoubt = endIfInDoubt(ctx, ref, failure, log);
  if (inDoubt) return inDoubt;
  switch (failure.kind) {
    case 'permanent':
      ctx.metrics.sends.inc({ outcome: 'rejected' });
      log.warn({ err, attempt: attempt.n }, LIFECYCLE.followupSendFailed);
      return endUndeliverable(ctx, ref, failure.reason, 'sending');
    case 'auth_paused': {
      ctx.metrics.sends.inc({ outcome: 'auth_paused' });
      // The API did not take it: queued again, its budget unit back, no attempt spent.
      await requeue(ctx, ref, attempt, true, 0, log);
      // It left with a key the file no longer holds: try the new one at once, pause nothing.
      if (ctx.refreshKey()) return park(ctx, job, token, Date.now());
      const probeAt = await pauseSends(ctx.store, failure.httpStatus, log);
      if (job.id) await ctx.store.pause.noteParked(job.id);
      return park(ctx, job, token, jitteredUntil(probeAt));
    }
    case 'rate_limited': {
      ctx.metrics.sends.inc({ outcome: 'rate_limited' });
      ctx.concurrency.onRateLimited();
      const streak = (ctx.rateLimitStreak.get(ref.projectId) ?? 0) + 1;
      ctx.rateLimitStreak.set(ref.projectId, streak);
      const parkMs = rateLimitParkMs(failure.retryAfterMs, ctx.config.sendRateLimit, streak - 1);
      const requeued = await requeue(ctx, ref, attempt, false, parkMs, log);
      const until = typeof requeued === 'number' && requeued > 0 ? requeued : Date.now() + parkMs;
      log.warn({ parkMs, retryAfterMs: failure.retryAfterMs }, LIFECYCLE.projectParked);
      ctx.metrics.parkProject(ref.projectId, until);
      ctx.metrics.budgetWait.observe(parkMs / 1000);
      // Jittered: the project's parked follow-ups do not all wake in the park's last instant.
      return parkRateLimited(ctx, job, token, jitteredUntil(until), ref);
    }
    case 'transient':
      ctx.metrics.sends.inc({ outcome: 'transient' });
      await requeue(ctx, ref, attempt, failure.refund, 0, log);
      if (job.attemptsMade + 1 >= (job.opts.attempts ?? 1)) {
        log.warn({ err, attempt: attempt.n }, LIFECYCLE.followupSendFailed);
        return endUndeliverable(ctx, ref, `send_failed:${failure.reason}`, 'queued');
      }
      log.info({ err, attempt: attempt.n }, LIFECYCLE.followupRetry);
      throw err;
    case 'regrant':
      // Its grant is too old for the request to arrive within the budget's margin (this worker
      // stalled): nothing left, the unit goes back and it acquires again now, no attempt spent.
      ctx.metrics.sends.inc({ outcome: 'regrant' });
      log.info({ attempt: attempt.n }, LIFECYCLE.followupRegrant);
      await requeue(ctx, ref, attempt, 'unwritten', 0, log);
      return park(ctx, job, token, Date.now());
    case 'ambiguous':
      // The worker's own view decides what is in doubt: its timeout fired or the connection
      // reset after the request was written. Only such a send may be resent, and only when
      // the operator opted in (the poller settles it first).
      ctx.metrics.sends.inc({ outcome: 'ambiguous' });
      log.warn({ err, attempt: attempt.n, reason: failure.reason }, LIFECYCLE.followupAmbiguous);
      await recordOutcome(ctx, ref, attempt, 'unsettled', undefined, log);
      return failure.kind;
    case 'delivered':
      // A 200 with an unreadable body: delivered for sure, so not in doubt; the job is unknown.
      ctx.metrics.sends.inc({ outcome: 'sent' });
      log.warn({ err, attempt: attempt.n, reason: failure.reason }, LIFECYCLE.followupSent);
      await recordOutcome(ctx, ref, attempt, 'sent', undefined, log);
      return failure.kind;
  }
}

/**
 * Puts a refused send back to `queued` (see `store.requeue`), retried like a send's answer: a
 * re-queue the disk did not keep runs again once Redis is back, before the job moves on.
 */
function requeue(
  ctx: SendContext,
  ref: DispatchRef,
  attempt: Attempt,
  refund: boolean | 'unwritten',
  parkMs: number,
  log: Logger,
) {
  return ctx.store.tracking.requeue(
    ref,
    attempt.n,
    attempt.token,
    refund,
    parkMs,
    outcomeRetry(ctx, log),
  );
}

/**
 * How long to park a project after a 429 that named no wait: one budget slot's share of the
 * window, doubled for each 429 in a row, at most the whole window. The API's own figure, when
 * given, always wins.
 */
export function rateLimitParkMs(
  retryAfterMs: number | undefined,
  rate: { max: number; windowMs: number },
  consecutive: number,
): number {
  if (retryAfterMs !== undefined && retryAfterMs >= 0) return Math.max(retryAfterMs, 100);
  const slotMs = rate.windowMs / rate.max;
  return Math.min(rate.windowMs, Math.max(1_000, slotMs * 2 ** Math.min(consecutive, 20)));
}

/**
 * How a write that records what became of a send (MARK_SENT, REQUEUE) is retried: for as long as
 * a send's answer may still be recorded (`outcomeRetryMs`), each failure logged on `log` as a
 * Redis error, with `fields`.
 */
export function outcomeRetry(
  ctx: Pick<SendContext, 'outcomeRetryMs'>,
  log: Logger,
  fields: Record<string, unknown> = {},
): WriteRetry {
  return {
    budgetMs: ctx.outcomeRetryMs,
    onError: (err, retryInMs) => log.warn({ ...fields, err, retryInMs }, LIFECYCLE.redisError),
  };
}
