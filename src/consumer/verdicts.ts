import type { Job } from 'bullmq';
import { sleep } from '../time/deadline.js';
import { sendInFlightMs } from '../dispatch/in-flight.js';
import { earlierBy, jitteredUntil } from '../time/jitter.js';
import type { DispatchJobRef } from '../store/jobs.js';
import type { Verdict, WriteRetry } from '../store/store.js';
import type { RoleContext } from '../runtime/role.js';
import { isCreation } from '../dispatch/creation.js';
import { LIFECYCLE } from '../telemetry/names.js';
import {
  endExpired,
  endUndeliverable,
  park,
  parkPaused,
  parkRateLimited,
  missingRecord,
} from './endings.js';

/**
 * Every answer of ACQUIRE but `go`: the job parks (its lane, its project's pause, park or budget,
 * the fleet's auth pause, a write Redis did not keep) or its dispatch ends unsent here; `go` is
 * the processor's own (`send.ts`).
 */

/**
 * How long a dispatch waiting for its lane sleeps before it looks again by itself. It is normally
 * woken as soon as the lane frees (see `wakeDispatch`); this only bounds a lost wake-up.
 * @defaultValue 30 s
 */
const BLOCKED_RECHECK_MS = 30_000;

/** How long a dispatch whose intent Redis did not confirm on disk waits before it tries again. */
const NOT_DURABLE_RETRY_MS = 1_000;

/**
 * How long a follow-up of a paused project sleeps before it looks again by itself. The resume
 * wakes it at once; this only bounds a lost wake-up.
 * @defaultValue 60 s
 */
const PAUSED_RECHECK_MS = 60_000;

/**
 * Budget waits: a job is parked until `EARLY_WAKE_MS` before its reserved slot, and a slot at
 * most `NEAR_SLOT_MS` away is waited for in the worker (holding one of its in-flight places that
 * long), at most `MAX_NEAR_WAITS` times in a row before the job is parked again.
 */
const EARLY_WAKE_MS = 500;
const NEAR_SLOT_MS = 700;
const MAX_NEAR_WAITS = 3;

/** A verdict of ACQUIRE that sends nothing. */
export type NotGo = Exclude<Verdict, { kind: 'go' }>;

/**
 * One run of the processor, as far as a verdict other than `go` needs it: the job and its lock
 * `token`, the dispatch it names, how many times this run asked ACQUIRE again (`round`), how it
 * asks again (`again`: the processor once more, one round later), and how a write of what became
 * of an earlier run's send is retried (`retry`, as the send's own `outcomeRetry`).
 */
export interface ProcessorRun {
  readonly job: Job;
  readonly ref: DispatchJobRef;
  readonly token: string | undefined;
  readonly round: number;
  readonly again: () => Promise<string>;
  readonly retry: WriteRetry;
}

/** What the processor does with a verdict that is not `go`: a park (it throws) or an end. */
export async function afterVerdict(
  ctx: RoleContext,
  run: ProcessorRun,
  verdict: NotGo,
): Promise<string> {
  const { job, ref, token } = run;
  switch (verdict.kind) {
    case 'auth_paused':
      // The key was rejected: this follow-up waits, untouched, for the fleet's next probe.
      ctx.metrics.sends.inc({ outcome: 'auth_paused' });
      if (job.id) await ctx.store.pause.noteParked(job.id);
      return park(ctx, job, token, jitteredUntil(verdict.untilMs));
    case 'paused':
      // The operator paused the project: nothing spent; the resume wakes it.
      ctx.metrics.sends.inc({ outcome: 'project_paused' });
      return parkPaused(ctx, job, token, jitteredUntil(Date.now() + PAUSED_RECHECK_MS), ref);
    case 'blocked':
      ctx.metrics.sends.inc({ outcome: 'blocked' });
      return park(ctx, job, token, jitteredUntil(Date.now() + BLOCKED_RECHECK_MS), ref);
    case 'parked':
    case 'over':
      return budgetWait(ctx, run, verdict);
    case 'invalid':
      // Its prompt cannot be sent (see acquire-n.lua): it ends unsent, no budget unit spent.
      return endUndeliverable(ctx, ref, 'invalid_payload', 'queued');
    case 'expired':
      // Its deadline passed before its turn: it ends unsent, and its lane goes on.
      return endExpired(ctx, ref);
    case 'no_job':
      // Chained to a creation that ended without a job: nothing to send to, nothing spent.
      return endUndeliverable(ctx, ref, 'job_not_created', 'queued');
    case 'creation_expired':
      // Its creation's record expired (DISPATCH_RETENTION) before it learned the job: unsent.
      return endUndeliverable(ctx, ref, 'creation_expired', 'queued');
    case 'not_durable':
      // Nothing was sent: it is queued again, and tries again shortly, no attempt spent.
      ctx.metrics.sends.inc({ outcome: 'not_durable' });
      ctx.logger.warn({ ...ref, reason: verdict.reason }, LIFECYCLE.followupNotDurable);
      return park(ctx, job, token, jitteredUntil(Date.now() + NOT_DURABLE_RETRY_MS));
    case 'missing': {
      // A record registered since ACQUIRE (a send of the same key retried after a refusal) is
      // never ended here: when this job is its job, it runs again.
      const ended = await missingRecord(ctx, job);
      const rerun = ended === 'rerun' || ended.endsWith(': record-exists');
      if (rerun && run.round < MAX_NEAR_WAITS) return run.again();
      return rerun ? 'record registered again: left to the repair sweep' : ended;
    }
    case 'not-queued':
      return `already ${verdict.state}`;
    case 'sending':
      return anotherRunSending(ctx, run, verdict);
  }
}

/** Its project is parked (a 429) or its budget reserved it a later slot (`over`): it waits. */
async function budgetWait(
  ctx: RoleContext,
  { job, ref, token, round, again }: ProcessorRun,
  verdict: { kind: 'parked' | 'over'; untilMs: number },
): Promise<string> {
  const waitMs = verdict.untilMs - Date.now();
  ctx.metrics.sends.inc({ outcome: 'budget_wait' });
  ctx.metrics.budgetWait.observe(Math.max(0, waitMs) / 1000);
  // A reserved slot is spent on time only if the job is awake at it: BullMQ wakes a delayed
  // job up to about 100 ms late (Redis checks blocked clients' timeouts `hz` times a
  // second), so the job is parked until shortly before its slot and waits the rest here.
  if (verdict.kind === 'over' && waitMs <= NEAR_SLOT_MS && round < MAX_NEAR_WAITS) {
    await sleep(Math.max(0, waitMs));
    return again();
  }
  // Jittered so that a backlog parked together does not wake together: a project park
  // later (it is never cut short), a reserved slot earlier, never past the near wait.
  if (verdict.kind === 'over')
    return park(
      ctx,
      job,
      token,
      earlierBy(verdict.untilMs - EARLY_WAKE_MS, NEAR_SLOT_MS - EARLY_WAKE_MS),
    );
  // Noted, so that `project unpark` wakes it at once.
  return parkRateLimited(ctx, job, token, jitteredUntil(verdict.untilMs), ref);
}

/** Another run of this job recorded the intent and no outcome. */
async function anotherRunSending(
  ctx: RoleContext,
  { job, ref, token, retry }: ProcessorRun,
  verdict: { sendingAt: number; attemptToken: string },
): Promise<string> {
  // While its request could still be in flight (a run BullMQ thought stalled may be alive),
  // wait for it.
  const settledBy = verdict.sendingAt + sendInFlightMs(ctx.config);
  if (Date.now() < settledBy) return park(ctx, job, token, settledBy);
  // Its worker died between intent and outcome: the prompt may have gone out. Never resend
  // blindly; the poller, tracking it since the intent, settles it from the job's status.
  // A creation cannot be settled (no job id, and nothing lists jobs): it ends ambiguous.
  if (isCreation(ref)) return endUndeliverable(ctx, ref, 'ambiguous', 'sending');
  // Marked on behalf of the attempt that holds the intent, so its own late answer still
  // counts, and nothing changes if that attempt recorded its outcome meanwhile.
  // Retried like a send's own answer: once this job completes, nothing else marks it.
  ctx.logger.warn({ ...ref }, LIFECYCLE.followupAmbiguous);
  await ctx.store.markSent(
    ref,
    'unsettled',
    undefined,
    ctx.config.pollMinIntervalMs,
    verdict.attemptToken,
    retry,
  );
  ctx.metrics.sends.inc({ outcome: 'ambiguous' });
  return 'unsettled after a crash';
}
