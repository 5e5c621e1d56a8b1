import type { Job } from 'bullmq';
import type { AgentJob } from '../agent-api/index.js';
import { isCreation } from '../dispatch/creation.js';
import type { DispatchRef, MarkResult, WriteRetry } from '../store/store.js';
import { resumeSends } from '../runtime/auth-pause.js';
import { reportItemError } from '../runtime/store-item-error.js';
import type { RoleContext } from '../runtime/role.js';
import type { Logger } from '../telemetry/logger.js';
import { errorCode } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { onFailure, type FailedSend } from './after-failure.js';
import type { ConcurrencyController } from './concurrency.js';
import { endIfInDoubt } from './create.js';

/**
 * One send: the POST of an acquired follow-up and the recording of its answer. What is done when
 * it fails is `after-failure.ts`'s; what a creation changes in it, `create.ts`'s.
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
    return onFailure(ctx, failedSend(ctx, ref, attempt, probe, job, token, log), err);
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

/** A failed send as `onFailure` takes it, with this send's ways to record what became of it. */
function failedSend(
  ctx: SendContext,
  ref: DispatchRef,
  attempt: Attempt,
  probe: boolean,
  job: Job,
  token: string | undefined,
  log: Logger,
): FailedSend {
  return {
    ...{ ref, attempt, probe, job, token, log },
    recordOutcome: (state: 'sent' | 'unsettled') =>
      recordOutcome(ctx, ref, attempt, state, undefined, log),
    outcomeRetry: () => outcomeRetry(ctx, log),
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
