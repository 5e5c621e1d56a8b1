import { DelayedError, type Job, type Queue } from 'bullmq';
import type { AgentApiClient } from '../agent-api/index.js';
import type { Config } from '../config/index.js';
import { checkFollowUp } from '../dispatch/followup.js';
import { publishOrphan } from '../dispatch/orphan.js';
import { dispatchJobSchema, type DispatchJobData } from '../dispatch/queue.js';
import type { DispatchRef, DispatchStore } from '../dispatch/store.js';
import { wakeDispatch } from '../dispatch/wake.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { EVENT_TYPES, LIFECYCLE } from '../telemetry/names.js';
import {
  budgetMarginMs,
  classifySendFailure,
  rateLimitParkMs,
  type SendFailure,
} from './classify.js';
import type { ConcurrencyController } from './concurrency.js';

/**
 * How long a dispatch waiting for its lane sleeps before it looks again by itself. It is normally
 * woken as soon as the lane frees (see `wakeDispatch`); this only bounds a lost wake-up.
 * @defaultValue 30 s
 */
const BLOCKED_RECHECK_MS = 30_000;

/**
 * Past its intent, an attempt's request has ended (answered or timed out) after `SEND_TIMEOUT`
 * plus this: connecting, writing and our own bookkeeping.
 */
const IN_FLIGHT_SLACK_MS = 5_000;

/** What the processor needs, built once per worker process. */
export interface SendContext {
  readonly config: Config;
  readonly store: DispatchStore;
  readonly api: AgentApiClient;
  readonly queue: Queue;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly concurrency: ConcurrencyController;
  readonly workerId: string;
}

/** Creates the BullMQ processor: one follow-up from acquire to its outcome. */
export function createProcessor(ctx: SendContext) {
  const rate = {
    max: ctx.config.sendRateLimit.max,
    windowMs: ctx.config.sendRateLimit.windowMs + budgetMarginMs(ctx.config.sendRateLimit.windowMs),
  };
  const toleranceMs = budgetMarginMs(ctx.config.sendRateLimit.windowMs) / 2;
  const rateLimitStreak = new Map<string, number>();

  return async function process(job: Job<DispatchJobData>, token?: string): Promise<string> {
    const parsed = dispatchJobSchema.safeParse(job.data);
    if (!parsed.success) return poison(ctx, job, 'invalid_payload');
    const ref = parsed.data;
    const verdict = await ctx.store.acquire(ref, rate, toleranceMs, ctx.config.pollMinIntervalMs);
    switch (verdict.kind) {
      case 'go':
        return send(ref, verdict.attempt, verdict.prompt, job, token);
      case 'blocked':
        ctx.metrics.sends.inc({ outcome: 'blocked' });
        return park(ctx, job, token, Date.now() + BLOCKED_RECHECK_MS, ref);
      case 'parked':
      case 'over':
        ctx.metrics.sends.inc({ outcome: 'budget_wait' });
        ctx.metrics.budgetWait.observe(Math.max(0, verdict.untilMs - Date.now()) / 1000);
        return park(ctx, job, token, verdict.untilMs);
      case 'missing':
        return poison(ctx, job, 'missing_record');
      case 'not-queued':
        return `already ${verdict.state}`;
      case 'sending': {
        // Another run of this job recorded the intent and no outcome. While its request could
        // still be in flight (a run BullMQ thought stalled may be alive), wait for it.
        const settledBy = verdict.sendingAt + ctx.config.sendTimeoutMs + IN_FLIGHT_SLACK_MS;
        if (Date.now() < settledBy) return park(ctx, job, token, settledBy);
        // Its worker died between intent and outcome: the prompt may have gone out. Never resend
        // blindly; the poller, tracking it since the intent, settles it from the job's status.
        ctx.logger.warn({ ...ref }, LIFECYCLE.followupAmbiguous);
        await ctx.store.markSent(ref, 'unsettled', undefined, ctx.config.pollMinIntervalMs);
        ctx.metrics.sends.inc({ outcome: 'ambiguous' });
        return 'unsettled after a crash';
      }
    }
  };

  async function send(
    ref: DispatchRef,
    attempt: number,
    prompt: string,
    job: Job,
    token: string | undefined,
  ): Promise<string> {
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
    try {
      const agentJob = await ctx.api.sendMessage(ref.projectId, ref.jobId, prompt);
      const latencyMs = performance.now() - started;
      ctx.metrics.apiLatency.observe({ operation: 'send', outcome: 'ok' }, latencyMs / 1000);
      ctx.concurrency.onAnswer(latencyMs);
      rateLimitStreak.delete(ref.projectId);
      await ctx.store.markSent(ref, 'sent', agentJob, ctx.config.pollMinIntervalMs);
      ctx.metrics.sends.inc({ outcome: 'sent' });
      log.debug(
        { attempt, status: agentJob.status, latencyMs: Math.round(latencyMs) },
        LIFECYCLE.followupSent,
      );
      return 'sent';
    } catch (err) {
      const failure = classifySendFailure(err);
      ctx.metrics.apiLatency.observe(
        { operation: 'send', outcome: errorCode(err) },
        (performance.now() - started) / 1000,
      );
      return onFailure(ref, attempt, failure, { job, token }, err, log);
    }
  }

  async function onFailure(
    ref: DispatchRef,
    attempt: number,
    failure: SendFailure,
    { job, token }: { job: Job; token: string | undefined },
    err: unknown,
    log: Logger,
  ): Promise<string> {
    switch (failure.kind) {
      case 'permanent':
        ctx.metrics.sends.inc({ outcome: 'rejected' });
        log.warn({ err, attempt }, LIFECYCLE.followupFinished);
        return endUndeliverable(ctx, ref, failure.reason, 'sending');
      case 'rate_limited': {
        ctx.metrics.sends.inc({ outcome: 'rate_limited' });
        ctx.concurrency.onRateLimited();
        const streak = (rateLimitStreak.get(ref.projectId) ?? 0) + 1;
        rateLimitStreak.set(ref.projectId, streak);
        const parkMs = rateLimitParkMs(failure.retryAfterMs, ctx.config.sendRateLimit, streak - 1);
        const until = (await ctx.store.requeue(ref, attempt, false, parkMs)) || Date.now() + parkMs;
        log.warn({ parkMs, retryAfterMs: failure.retryAfterMs }, LIFECYCLE.projectParked);
        ctx.metrics.budgetWait.observe(parkMs / 1000);
        await job.moveToDelayed(until, token);
        throw new DelayedError();
      }
      case 'transient':
        ctx.metrics.sends.inc({ outcome: 'transient' });
        await ctx.store.requeue(ref, attempt, failure.refund);
        if (job.attemptsMade + 1 >= (job.opts.attempts ?? 1)) {
          log.warn({ err, attempt }, LIFECYCLE.followupFinished);
          return endUndeliverable(ctx, ref, `send_failed:${failure.reason}`, 'queued');
        }
        log.info({ err, attempt }, LIFECYCLE.followupRetry);
        throw err;
      case 'ambiguous':
      case 'delivered':
        ctx.metrics.sends.inc({ outcome: failure.kind === 'ambiguous' ? 'ambiguous' : 'sent' });
        log.warn({ err, attempt, reason: failure.reason }, LIFECYCLE.followupAmbiguous);
        await ctx.store.markSent(
          ref,
          failure.kind === 'ambiguous' ? 'unsettled' : 'sent',
          undefined,
          ctx.config.pollMinIntervalMs,
        );
        return failure.kind;
    }
  }
}

/**
 * Parks a job until `untilMs` without spending an attempt. For a lane wait (`ref` given), looks at
 * the lane once more after parking: if it freed in between, nobody else will wake this job.
 */
async function park(
  ctx: SendContext,
  job: Job,
  token: string | undefined,
  untilMs: number,
  ref?: DispatchRef,
): Promise<never> {
  await job.moveToDelayed(untilMs, token);
  if (ref && (await ctx.store.isNext(ref))) await wakeDispatch(ctx.queue, ref.dispatchId);
  throw new DelayedError();
}

/** Ends a dispatch undeliverable (from `expected` state) and wakes its lane's next one. */
async function endUndeliverable(
  ctx: SendContext,
  ref: DispatchRef,
  reason: string,
  expected: 'sending' | 'queued',
): Promise<string> {
  const record = await ctx.store.get(ref.dispatchId);
  if (!record) return 'gone';
  const { finished, nextDispatchId } = await ctx.store.finish(
    record,
    { type: EVENT_TYPES.undeliverable, reason },
    expected,
  );
  if (finished) ctx.metrics.eventsPublished.inc({ type: EVENT_TYPES.undeliverable });
  if (nextDispatchId) await wakeDispatch(ctx.queue, nextDispatchId);
  return `undeliverable: ${reason}`;
}

/**
 * A job whose payload this version cannot read (an older version wrote it, or something else
 * did). Its dispatch, when there is one, ends undeliverable; the job completes, so it cannot loop.
 */
async function poison(ctx: SendContext, job: Job, reason: string): Promise<string> {
  ctx.logger.error({ bullJobId: job.id, reason }, LIFECYCLE.followupPoison);
  // An empty id names nothing: fall back to the job's own id, so the orphan event still goes out.
  const claimed: unknown = job.data?.dispatchId;
  const dispatchId = typeof claimed === 'string' && claimed !== '' ? claimed : job.id;
  if (!dispatchId) return `poison: ${reason}`;
  const record = await ctx.store.get(dispatchId);
  if (!record) {
    await publishOrphan(ctx.store, job.id ?? dispatchId, job.data, reason);
    return `poison: ${reason}`;
  }
  if (record.state !== 'queued' && record.state !== 'sending')
    return `poison: ${reason}, ${record.state}`;
  return endUndeliverable(ctx, record, reason, record.state);
}

function errorCode(err: unknown): string {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : 'error';
}
