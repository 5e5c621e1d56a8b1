import { randomUUID } from 'node:crypto';
import { DelayedError, type Job } from 'bullmq';
import { isAgentApiError, type AgentJob } from '../agent-api/index.js';
import type { SendContext } from './context.js';
import { endUndeliverable, errorCode, park, poison } from './endings.js';
import { sleep } from '../runtime/deadline.js';
import { pauseSends, resumeSends } from '../dispatch/auth-pause.js';
import { checkFollowUp } from '../dispatch/followup.js';
import { markSentRetryMs, sendInFlightMs } from '../dispatch/in-flight.js';
import { dispatchJobSchema, type DispatchJobData } from '../dispatch/queue.js';
import type { DispatchRef, MarkResult } from '../dispatch/store.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import {
  budgetMarginMs,
  classifySendFailure,
  rateLimitParkMs,
  type SendFailure,
} from './classify.js';
import { retryFor, retryOnConnectionError } from './redis-retry.js';

/**
 * How long a dispatch waiting for its lane sleeps before it looks again by itself. It is normally
 * woken as soon as the lane frees (see `wakeDispatch`); this only bounds a lost wake-up.
 * @defaultValue 30 s
 */
const BLOCKED_RECHECK_MS = 30_000;

/**
 * Budget waits: a job is parked until `EARLY_WAKE_MS` before its reserved slot, and a slot at
 * most `NEAR_SLOT_MS` away is waited for in the worker (holding one of its in-flight places that
 * long), at most `MAX_NEAR_WAITS` times in a row before the job is parked again.
 */
const EARLY_WAKE_MS = 500;
const NEAR_SLOT_MS = 700;
const MAX_NEAR_WAITS = 3;

/** One attempt to send: its number, and the token it holds the dispatch's intent with. */
interface Attempt {
  readonly n: number;
  readonly token: string;
}

/** Creates the BullMQ processor: one follow-up from acquire to its outcome. */
export function createProcessor(ctx: SendContext) {
  const rate = {
    max: ctx.config.sendRateLimit.max,
    windowMs: ctx.config.sendRateLimit.windowMs + budgetMarginMs(ctx.config.sendRateLimit.windowMs),
  };
  const toleranceMs = budgetMarginMs(ctx.config.sendRateLimit.windowMs) / 2;
  const rateLimitStreak = new Map<string, number>();

  return async function process(
    job: Job<DispatchJobData>,
    token?: string,
    round = 0,
  ): Promise<string> {
    const parsed = dispatchJobSchema.safeParse(job.data);
    if (!parsed.success) return poison(ctx, job, 'invalid_payload');
    const ref = parsed.data;
    // A fresh token per run: a retried or resent ACQUIRE of this run is answered `go` again, any
    // other run's (a rerun of a job thought stalled) `sending`.
    const attemptToken = randomUUID();
    const verdict = await retryOnConnectionError(() =>
      ctx.store.acquire(ref, rate, toleranceMs, ctx.config.pollMinIntervalMs, attemptToken),
    );
    switch (verdict.kind) {
      case 'go':
        ctx.metrics.projectSends.inc({ project: ref.projectId });
        return send(
          ref,
          { n: verdict.attempt, token: attemptToken },
          { prompt: verdict.prompt, probe: verdict.probe },
          job,
          token,
        );
      case 'auth_paused':
        // The key was rejected: this follow-up waits, untouched, for the fleet's next probe.
        ctx.metrics.sends.inc({ outcome: 'auth_paused' });
        return park(ctx, job, token, verdict.untilMs);
      case 'blocked':
        ctx.metrics.sends.inc({ outcome: 'blocked' });
        return park(ctx, job, token, Date.now() + BLOCKED_RECHECK_MS, ref);
      case 'parked':
      case 'over': {
        const waitMs = verdict.untilMs - Date.now();
        ctx.metrics.sends.inc({ outcome: 'budget_wait' });
        ctx.metrics.budgetWait.observe(Math.max(0, waitMs) / 1000);
        // A reserved slot is spent on time only if the job is awake at it: BullMQ wakes a delayed
        // job up to about 100 ms late (Redis checks blocked clients' timeouts `hz` times a
        // second), so the job is parked until shortly before its slot and waits the rest here.
        if (verdict.kind === 'over' && waitMs <= NEAR_SLOT_MS && round < MAX_NEAR_WAITS) {
          await sleep(Math.max(0, waitMs));
          return process(job, token, round + 1);
        }
        return park(
          ctx,
          job,
          token,
          verdict.untilMs - (verdict.kind === 'over' ? EARLY_WAKE_MS : 0),
        );
      }
      case 'missing':
        return poison(ctx, job, 'missing_record');
      case 'not-queued':
        return `already ${verdict.state}`;
      case 'sending': {
        // Another run of this job recorded the intent and no outcome. While its request could
        // still be in flight (a run BullMQ thought stalled may be alive), wait for it.
        const settledBy = verdict.sendingAt + sendInFlightMs(ctx.config);
        if (Date.now() < settledBy) return park(ctx, job, token, settledBy);
        // Its worker died between intent and outcome: the prompt may have gone out. Never resend
        // blindly; the poller, tracking it since the intent, settles it from the job's status.
        // Marked on behalf of the attempt that holds the intent, so its own late answer still
        // counts, and nothing changes if that attempt recorded its outcome meanwhile.
        ctx.logger.warn({ ...ref }, LIFECYCLE.followupAmbiguous);
        await ctx.store.markSent(
          ref,
          'unsettled',
          undefined,
          ctx.config.pollMinIntervalMs,
          verdict.attemptToken,
        );
        ctx.metrics.sends.inc({ outcome: 'ambiguous' });
        return 'unsettled after a crash';
      }
    }
  };

  async function send(
    ref: DispatchRef,
    attempt: Attempt,
    { prompt, probe }: { prompt: string; probe: boolean },
    job: Job,
    token: string | undefined,
  ): Promise<string> {
    // The probe of a paused fleet tries the key as the key file has it now.
    if (probe) ctx.refreshKey();
    const log = ctx.logger.child({
      dispatchId: ref.dispatchId,
      projectId: ref.projectId,
      jobId: ref.jobId,
    });
    const checked = checkFollowUp(
      { projectId: ref.projectId, jobId: ref.jobId, prompt },
      ctx.config.promptMaxBytes,
    );
    if (!checked.ok) return endUndeliverable(ctx, ref, 'invalid_payload', 'sending');
    const started = performance.now();
    let agentJob: AgentJob;
    try {
      agentJob = await ctx.api.sendMessage(ref.projectId, ref.jobId, prompt);
    } catch (err) {
      const failure = classifySendFailure(err);
      ctx.metrics.apiLatency.observe(
        { operation: 'send', outcome: errorCode(err) },
        (performance.now() - started) / 1000,
      );
      // Any answer but a rejection shows the key and the URL work again.
      if (probe && failure.kind !== 'auth_paused' && isAgentApiError(err) && err.httpStatus)
        await resumeSends(ctx.store, log);
      return onFailure(ref, attempt, failure, { job, token }, err, log);
    }
    const latencyMs = performance.now() - started;
    ctx.metrics.apiLatency.observe({ operation: 'send', outcome: 'ok' }, latencyMs / 1000);
    ctx.concurrency.onAnswer(latencyMs);
    rateLimitStreak.delete(ref.projectId);
    // Outside the try above: a Redis error here is no failure of the send, which was delivered.
    await recordOutcome(ref, attempt, 'sent', agentJob, log);
    if (probe) await resumeSends(ctx.store, log);
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
  async function recordOutcome(
    ref: DispatchRef,
    attempt: Attempt,
    state: 'sent' | 'unsettled',
    agentJob: AgentJob | undefined,
    log: Logger,
  ): Promise<void> {
    let result: MarkResult;
    try {
      result = await retryFor(
        markSentRetryMs(ctx.config),
        () => ctx.store.markSent(ref, state, agentJob, ctx.config.pollMinIntervalMs, attempt.token),
        (err, retryInMs) => log.warn({ err, state, retryInMs }, LIFECYCLE.redisError),
      );
    } catch (err) {
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

  async function onFailure(
    ref: DispatchRef,
    attempt: Attempt,
    failure: SendFailure,
    { job, token }: { job: Job; token: string | undefined },
    err: unknown,
    log: Logger,
  ): Promise<string> {
    switch (failure.kind) {
      case 'permanent':
        ctx.metrics.sends.inc({ outcome: 'rejected' });
        log.warn({ err, attempt: attempt.n }, LIFECYCLE.followupFinished);
        return endUndeliverable(ctx, ref, failure.reason, 'sending');
      case 'auth_paused': {
        ctx.metrics.sends.inc({ outcome: 'auth_paused' });
        // The API did not take it: queued again, its budget unit back, no attempt spent.
        await ctx.store.requeue(ref, attempt.n, attempt.token, true);
        // It left with a key the file no longer holds: try the new one at once, pause nothing.
        if (ctx.refreshKey()) return park(ctx, job, token, Date.now());
        return park(ctx, job, token, await pauseSends(ctx.store, failure.httpStatus, log));
      }
      case 'rate_limited': {
        ctx.metrics.sends.inc({ outcome: 'rate_limited' });
        ctx.concurrency.onRateLimited();
        const streak = (rateLimitStreak.get(ref.projectId) ?? 0) + 1;
        rateLimitStreak.set(ref.projectId, streak);
        const parkMs = rateLimitParkMs(failure.retryAfterMs, ctx.config.sendRateLimit, streak - 1);
        const requeued = await ctx.store.requeue(ref, attempt.n, attempt.token, false, parkMs);
        const until = typeof requeued === 'number' && requeued > 0 ? requeued : Date.now() + parkMs;
        log.warn({ parkMs, retryAfterMs: failure.retryAfterMs }, LIFECYCLE.projectParked);
        ctx.metrics.parkProject(ref.projectId, until);
        ctx.metrics.budgetWait.observe(parkMs / 1000);
        await job.moveToDelayed(until, token);
        throw new DelayedError();
      }
      case 'transient':
        ctx.metrics.sends.inc({ outcome: 'transient' });
        await ctx.store.requeue(ref, attempt.n, attempt.token, failure.refund);
        if (job.attemptsMade + 1 >= (job.opts.attempts ?? 1)) {
          log.warn({ err, attempt: attempt.n }, LIFECYCLE.followupFinished);
          return endUndeliverable(ctx, ref, `send_failed:${failure.reason}`, 'queued');
        }
        log.info({ err, attempt: attempt.n }, LIFECYCLE.followupRetry);
        throw err;
      case 'ambiguous':
        // The worker's own view decides what is in doubt: its timeout fired or the connection
        // reset after the request was written. Only such a send may be resent, and only when
        // the operator opted in (the poller settles it first).
        ctx.metrics.sends.inc({ outcome: 'ambiguous' });
        log.warn({ err, attempt: attempt.n, reason: failure.reason }, LIFECYCLE.followupAmbiguous);
        await recordOutcome(ref, attempt, 'unsettled', undefined, log);
        return failure.kind;
      case 'delivered':
        // A 200 with an unreadable body: delivered for sure, so not in doubt; the job is unknown.
        ctx.metrics.sends.inc({ outcome: 'sent' });
        log.warn({ err, attempt: attempt.n, reason: failure.reason }, LIFECYCLE.followupSent);
        await recordOutcome(ref, attempt, 'sent', undefined, log);
        return failure.kind;
    }
  }
}
