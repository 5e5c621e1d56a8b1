import type { Queue } from 'bullmq';
import type { Config } from '../config/index.js';
import type { DispatchStore, OpenDispatch } from '../store/store.js';
import { addDispatchJob } from '../store/jobs.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';

/**
 * The repair sweep. A queued dispatch moves only when its BullMQ job runs; a job can vanish behind
 * the service's back (a manual `DEL`, an operator emptying the queue, a crash between steps),
 * and its record would then stay `queued` and block its lane forever. So the poller walks the
 * open dispatches (`DispatchStore.open`) and gives a queued one whose job is gone (or ended while
 * it was still queued) a job again. The new job is an ordinary dispatch job: the worker checks
 * lane, park and budget as always, and a spurious one finds the record moved on and ends.
 *
 * Cost: a pass starts at most once per `REPAIR_GRACE`, and each poll tick reads one page of about
 * {@link SWEEP_PAGE} open dispatches (a ZRANGE of the open index or a script call that scans lanes
 * of one, a pipeline of HMGETs without the prompt, and one pipeline of three reads per queued
 * one), so a backlog of 10 000 is walked in about 20 ticks, never all in one. Dispatches younger
 * than the grace are not looked at: REGISTER and the job's `add` share one MULTI, so a job is
 * never legitimately missing for more than an instant.
 */

/** Open dispatches read per tick. */
const SWEEP_PAGE = 500;

/** What the sweep needs; a subset of the tick's context. */
export interface RepairContext {
  readonly config: Config;
  readonly store: DispatchStore;
  readonly queue: Queue;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

/** What one page of the sweep did. */
export interface RepairResult {
  readonly checked: number;
  readonly repaired: number;
}

/** Sweeps one page of the open dispatches, if a pass is due or running. */
export async function sweepLostJobs(ctx: RepairContext): Promise<RepairResult> {
  const graceMs = ctx.config.repairGraceMs;
  const pass = await ctx.store.poll.startRepairPass(graceMs);
  if (!pass) return { checked: 0, repaired: 0 };
  const { cursor, nowMs } = pass;
  const page = await ctx.store.open.page(cursor, SWEEP_PAGE, nowMs - graceMs);
  const { dispatches } = page;

  const gone = dispatches.filter((d) => d.state === undefined || d.state === 'done');
  for (const d of gone) if (d.state === undefined) await orphaned(ctx, d);
  await ctx.store.open.drop(gone);

  const queued = dispatches.filter((d) => d.state === 'queued' && !d.resendPending);
  const presence = await ctx.store.poll.jobPresence(
    (name) => ctx.queue.toKey(name),
    queued.map((d) => d.bullJobId),
    nowMs - graceMs,
  );
  let repaired = 0;
  for (const [i, d] of queued.entries()) {
    const seen = presence[i];
    if (seen === 'live') continue;
    if (await repairOne(ctx, d, seen === 'ended')) repaired++;
  }
  // Dropped entries shifted the open index's ranks after them down; what a shift skips, the next
  // pass sees.
  await ctx.store.poll.moveRepairCursor(page.next(gone.length), graceMs);
  return { checked: dispatches.length, repaired };
}

/**
 * Gives a queued dispatch its job back. A missing job is added again under the same id: adding an
 * existing id is a no-op, so a rerun of the sweep cannot add two, and a lane's wake-up still finds
 * it. A job that ended while its record is still queued keeps its id, so the new one gets a fresh
 * one (`<dispatchId>-f<n>`), recorded first with a compare-and-set so that only one sweep adds it.
 */
async function repairOne(ctx: RepairContext, d: OpenDispatch, ended: boolean): Promise<boolean> {
  let bullJobId = d.bullJobId;
  if (ended) {
    bullJobId = `${d.dispatchId}-f${d.repairs + 1}`;
    if (!(await ctx.store.tracking.carry(d.dispatchId, d.bullJobId, bullJobId))) return false;
  }
  await addDispatchJob(ctx.queue, d, bullJobId, ctx.config.sendAttempts);
  ctx.metrics.repairs.inc({ outcome: ended ? 'replaced' : 'readded' });
  ctx.logger.warn(
    {
      dispatchId: d.dispatchId,
      projectId: d.projectId,
      jobId: d.jobId,
      bullJobId,
      lost: d.bullJobId,
      cause: ended ? 'job_ended' : 'job_missing',
      ageMs: Date.now() - d.enqueuedAt,
    },
    LIFECYCLE.followupRepaired,
  );
  return true;
}

/**
 * An open dispatch whose record is gone (deleted by hand, or lost by Redis): it cannot be sent,
 * but it was accepted, so it ends with one undeliverable event (once per id, as for a job without
 * a record) carrying the only fact left, its id.
 */
async function orphaned(ctx: RepairContext, d: OpenDispatch): Promise<void> {
  const { dispatchId, projectId, jobId } = d;
  const orphan = { bullJobId: dispatchId, dispatchId, projectId, jobId };
  const payload = { dispatchId: d.dispatchId };
  if ((await ctx.store.tracking.publishOrphan(orphan, payload, 'missing_record')) === 'published') {
    ctx.metrics.repairs.inc({ outcome: 'orphaned' });
    ctx.logger.warn(
      { dispatchId: d.dispatchId, cause: 'record_missing' },
      LIFECYCLE.followupRepaired,
    );
  }
}
