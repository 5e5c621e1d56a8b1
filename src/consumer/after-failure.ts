import type { Job } from 'bullmq';
import { isAgentApiError } from '../agent-api/index.js';
import type { DispatchRef, WriteRetry } from '../store/store.js';
import { pauseSends, resumeSends } from '../runtime/auth-pause.js';
import { jitteredUntil } from '../time/jitter.js';
import type { RoleContext } from '../runtime/role.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { endIfInDoubt } from './create.js';
import { endUndeliverable, park, parkRateLimited } from './endings.js';
import { classifySendFailure } from './send-failure.js';

/**
 * What the worker does when a send fails (what the failure means is decided in
 * `send-failure.ts`): it ends the dispatch, queues it again, parks the job or its project, or
 * records the send in doubt for the poller to settle.
 */

/** What the handling of a failed send needs of the processor's context (`SendContext`). */
export type FailureContext = RoleContext & {
  /** The worker's limit on sends in flight (`ConcurrencyController`): a 429 halves it. */
  readonly concurrency: { onRateLimited(): void };
  /** 429s in a row per project, for the backoff of a 429 that names no wait. */
  readonly rateLimitStreak: Map<string, number>;
};

/**
 * A send that failed, as `sendFollowUp` hands it over: its dispatch, its attempt (number, token)
 * and job, whether it was the fleet's probe, its log, and the send's own ways to record its
 * outcome (`recordOutcome`) and to retry a write of what became of it (`outcomeRetry`).
 */
export interface FailedSend {
  readonly ref: DispatchRef;
  readonly attempt: { readonly n: number; readonly token: string };
  readonly probe: boolean;
  readonly job: Job;
  readonly token: string | undefined;
  readonly log: Logger;
  readonly recordOutcome: (state: 'sent' | 'unsettled') => Promise<void>;
  readonly outcomeRetry: () => WriteRetry;
}

/** A send failed: what that means (`send-failure.ts`), and what is done about it. */
export async function onFailure(
  ctx: FailureContext,
  failed: FailedSend,
  err: unknown,
): Promise<string> {
  const { ref, attempt, probe, job, token, log } = failed;
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
      await requeue(ctx, failed, true, 0);
      // It left with a key the file no longer holds: try the new one at once, pause nothing.
      if (ctx.refreshKey()) return park(ctx, job, token, Date.now());
      const probeAt = await pauseSends(ctx.store, failure.httpStatus, log);
      if (job.id) await ctx.store.pause.noteParked(job.id);
      return park(ctx, job, token, jitteredUntil(probeAt));
    }
    case 'rate_limited':
      return rateLimited(ctx, failed, failure.retryAfterMs);
    case 'transient':
      ctx.metrics.sends.inc({ outcome: 'transient' });
      await requeue(ctx, failed, failure.refund, 0);
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
      await requeue(ctx, failed, 'unwritten', 0);
      return park(ctx, job, token, Date.now());
    case 'ambiguous':
      // The worker's own view decides what is in doubt: its timeout fired or the connection
      // reset after the request was written. Only such a send may be resent, and only when
      // the operator opted in (the poller settles it first).
      ctx.metrics.sends.inc({ outcome: 'ambiguous' });
      log.warn({ err, attempt: attempt.n, reason: failure.reason }, LIFECYCLE.followupAmbiguous);
      await failed.recordOutcome('unsettled');
      return failure.kind;
    case 'delivered':
      // A 200 with an unreadable body: delivered for sure, so not in doubt; the job is unknown.
      ctx.metrics.sends.inc({ outcome: 'sent' });
      log.warn({ err, attempt: attempt.n, reason: failure.reason }, LIFECYCLE.followupSent);
      await failed.recordOutcome('sent');
      return failure.kind;
  }
}

/** A 429: the project is parked (the API's wait, else a growing one), and this job with it. */
async function rateLimited(
  ctx: FailureContext,
  failed: FailedSend,
  retryAfterMs: number | undefined,
): Promise<string> {
  const { ref, job, token, log } = failed;
  ctx.metrics.sends.inc({ outcome: 'rate_limited' });
  ctx.concurrency.onRateLimited();
  const streak = (ctx.rateLimitStreak.get(ref.projectId) ?? 0) + 1;
  ctx.rateLimitStreak.set(ref.projectId, streak);
  const parkMs = rateLimitParkMs(retryAfterMs, ctx.config.sendRateLimit, streak - 1);
  const requeued = await requeue(ctx, failed, false, parkMs);
  const until = typeof requeued === 'number' && requeued > 0 ? requeued : Date.now() + parkMs;
  log.warn({ parkMs, retryAfterMs }, LIFECYCLE.projectParked);
  ctx.metrics.parkProject(ref.projectId, until);
  ctx.metrics.budgetWait.observe(parkMs / 1000);
  // Jittered: the project's parked follow-ups do not all wake in the park's last instant.
  return parkRateLimited(ctx, job, token, jitteredUntil(until), ref);
}

/**
 * Puts a refused send back to `queued` (see `store.requeue`), retried like a send's answer: a
 * re-queue the disk did not keep runs again once Redis is back, before the job moves on.
 */
function requeue(
  ctx: FailureContext,
  { ref, attempt, outcomeRetry }: FailedSend,
  refund: boolean | 'unwritten',
  parkMs: number,
) {
  return ctx.store.tracking.requeue(ref, attempt.n, attempt.token, refund, parkMs, outcomeRetry());
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
