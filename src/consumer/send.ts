import { randomUUID } from 'node:crypto';
import type { Job } from 'bullmq';
import type { AgentJob } from '../agent-api/index.js';
import { budgetRate } from '../dispatch/budget.js';
import { isCreation } from '../dispatch/creation.js';
import { isConnectionError } from '../redis/connections.js';
import type { DispatchJobData, DispatchJobRef } from '../store/jobs.js';
import type { DispatchRef, MarkResult, WriteRetry } from '../store/store.js';
import { resumeSends } from '../runtime/auth-pause.js';
import { reportItemError, STORE_ITEM_RECHECK_MS } from '../runtime/store-item-error.js';
import type { RoleContext } from '../runtime/role.js';
import type { Logger } from '../telemetry/logger.js';
import { errorCode } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { sleep } from '../time/deadline.js';
import { jitteredUntil } from '../time/jitter.js';
import { onFailure, type FailedSend } from './after-failure.js';
import { endIfInDoubt } from './create.js';
import { park, poison } from './endings.js';
import { afterVerdict } from './verdicts.js';

/**
 * One follow-up's run in a worker: ACQUIRE, then, when it answers `go`, the POST and the
 * recording of its answer. Every other verdict is `verdicts.ts`'s, a failed POST
 * `after-failure.ts`'s, what a creation changes in it `create.ts`'s.
 */

/** What the worker's processor needs, built once per worker process. */
export interface SendContext extends RoleContext {
  /** The worker's limit on sends in flight (`ConcurrencyController`), which answers adjust. */
  readonly concurrency: { onAnswer(latencyMs: number): void; onRateLimited(): void };
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

/**
 * ACQUIRE is retried this many times after a connection error, `ACQUIRE_BACKOFF_MS` doubling:
 * with its attempt token a second run answers `go` again, spending nothing.
 */
const ACQUIRE_RETRIES = 4;
const ACQUIRE_BACKOFF_MS = 100;
/** Runs `command`, again after a connection error, a few times with a short backoff. */
export async function retryOnConnectionError<T>(command: () => Promise<T>): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await command();
    } catch (err) {
      if (retry >= ACQUIRE_RETRIES || !isConnectionError(err)) throw err;
      await sleep(ACQUIRE_BACKOFF_MS * 2 ** retry);
    }
  }
}

/**
 * Creates the BullMQ processor: one follow-up from ACQUIRE to its outcome. ACQUIRE decides, in
 * one script, whether the follow-up may go now (its lane, its project's park and budget, the
 * fleet's auth pause); `go` sends (`sendFollowUp`), every other answer parks the job or ends it
 * (`verdicts.ts`).
 */
export function createProcessor(ctx: SendContext) {
  // SEND_RATE_LIMIT; a project's own limit, when the operator set one, replaces it in ACQUIRE.
  const { toleranceMs, ...rate } = budgetRate(ctx.config.sendRateLimit);

  /** `ref`: what the job's payload names (`readDispatchJob`); `undefined`: a poison job. */
  return async function runJob(
    job: Job<DispatchJobData>,
    ref: DispatchJobRef | undefined,
    token?: string,
    round = 0,
  ): Promise<string> {
    if (!ref) return poison(ctx, job, 'invalid_payload');
    // A fresh token per run: a retried or resent ACQUIRE of this run is answered `go` again, any
    // other run's (a rerun of a job thought stalled) `sending`.
    const attemptToken = randomUUID();
    // When the (last) ACQUIRE was asked for: its grant came later, so a write deadline counted
    // from here by this process's monotonic clock is never later than the one counted from it.
    let askedAt = 0;
    const verdict = await retryOnConnectionError(() => {
      askedAt = performance.now();
      return ctx.store.acquire(ref, rate, toleranceMs, ctx.config.pollMinIntervalMs, attemptToken);
    }).catch((err: unknown) => {
      // Its keys or stored values are broken (a limit out of range, a key of the wrong type): its
      // ACQUIRE wrote nothing, and it waits, unsent and not ended, until an operator repairs them.
      if (!reportItemError(ctx, err, ref)) throw err;
      return park(ctx, job, token, jitteredUntil(Date.now() + STORE_ITEM_RECHECK_MS));
    });
    if (verdict.kind !== 'go') {
      const again = () => runJob(job, ref, token, round + 1);
      const retry = outcomeRetry(ctx, ctx.logger, { ...ref });
      return afterVerdict(ctx, { job, ref, token, round, again, retry }, verdict);
    }
    ctx.metrics.projectSends.inc({ project: ref.projectId });
    return sendFollowUp(
      ctx,
      ref,
      { n: verdict.attempt, token: attemptToken },
      {
        prompt: verdict.prompt,
        to: verdict.to,
        probe: verdict.probe,
        writeBy: verdict.writeWithinMs === undefined ? undefined : askedAt + verdict.writeWithinMs,
      },
      job,
      token,
    );
  };
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
    const failed: FailedSend = {
      ...{ ref, attempt, probe, job, token, log },
      recordOutcome: (state) => recordOutcome(ctx, ref, attempt, state, undefined, log),
      outcomeRetry: () => outcomeRetry(ctx, log),
    };
    return onFailure(ctx, failed, err);
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

/** The POST of an acquired dispatch: to `to`, or a new job when `to` is `''` (a creation). */
function post(
  ctx: RoleContext,
  projectId: string,
  to: string,
  prompt: string,
  writeBy: number | undefined,
): Promise<AgentJob> {
  return to === ''
    ? ctx.api.createJob(projectId, prompt, { writeBy })
    : ctx.api.sendMessage(projectId, to, prompt, { writeBy });
}

/**
 * What a send's log lines carry: `jobId` the job the prompt goes to (none yet for a creation),
 * and `lane` when that is another name (a creation's lane).
 */
function logFields(ref: DispatchRef, to: string): Record<string, string | undefined> {
  const lane = to === ref.jobId ? {} : { lane: ref.jobId };
  return { dispatchId: ref.dispatchId, projectId: ref.projectId, jobId: to || undefined, ...lane };
}

/** Whether a creation answered `job` names no new job: it is in doubt, as a lost answer is. */
function createdNoJob(ref: DispatchRef, job: AgentJob): boolean {
  return isCreation(ref) && (typeof job.id !== 'string' || job.id === '');
}
