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
 * Cost and bound: a pass starts at most once per `REPAIR_GRACE` and walks every open dispatch,
 * one page a poll tick, never all in one; a page is read in parts (each a ZRANGE of the open index
 * or a script call that scans lanes of one, a pipeline of HMGETs without the prompt, and one
 * pipeline of three reads per queued one). The page follows the backlog ({@link repairPage}): sized at the pass's start so that
 * the pass takes about as many ticks as fit in `REPAIR_GRACE`, at least {@link MIN_PAGE} and at
 * most {@link MAX_PAGE}. So a lost job waits for its repair at most the grace (before it is looked
 * at), the gap to the next pass (one grace) and one pass (about one grace, while the backlog is at
 * most {@link MAX_PAGE} times the ticks of a grace; beyond, it grows with the backlog at the
 * capped rate). Dispatches younger than the grace are not looked at: REGISTER and the job's `add`
 * share one MULTI, so a job is never legitimately missing for more than an instant.
 */

/** Open dispatches read per tick at least: what a small backlog costs. */
export const MIN_PAGE = 500;

/** Open dispatches read per tick at most: bounds one tick's Redis work. */
export const MAX_PAGE = 5_000;

/**
 * The page of a pass over about `open` dispatches: enough that the pass ends within the ticks of
 * one `REPAIR_GRACE` (POLL_INTERVAL apart), within {@link MIN_PAGE} and {@link MAX_PAGE}.
 */
export function repairPage(
  open: number,
  config: Pick<Config, 'repairGraceMs' | 'pollIntervalMs'>,
): number {
  const ticks = Math.max(1, Math.floor(config.repairGraceMs / config.pollIntervalMs));
  return Math.min(MAX_PAGE, Math.max(MIN_PAGE, Math.ceil(open / ticks)));
}

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
  /** This page was the pass's last. */
  readonly passEnded: boolean;
}

/**
 * Sweeps one page of the open dispatches, if a pass is due or running. `pageFor` sizes a new
 * pass's page from the open count (the bench compares {@link repairPage} with a fixed one). The
 * page is read in parts of at most {@link READ_PART}, the cursor moved after each.
 */
export async function sweepLostJobs(
  ctx: RepairContext,
  pageFor = (open: number) => repairPage(open, ctx.config),
): Promise<RepairResult> {
  const graceMs = ctx.config.repairGraceMs;
  const pass = await ctx.store.poll.startRepairPass(graceMs, pageFor);
  if (!pass) return { checked: 0, repaired: 0, passEnded: false };
  // One part more than the page needs: the walk's switch from the open index to the lanes of
  // one ends a part short.
  const parts = Math.ceil(pass.page / READ_PART) + 1;
  let cursor: string | undefined = pass.cursor;
  let [checked, repaired] = [0, 0];
  for (let part = 0; part < parts && cursor !== undefined && checked < pass.page; part++) {
    const count = Math.min(READ_PART, pass.page - checked);
    const swept = await sweepPart(ctx, cursor, count, pass.nowMs);
    [checked, repaired, cursor] = [checked + swept.checked, repaired + swept.repaired, swept.next];
  }
  if (cursor === undefined) ctx.metrics.repairPassSeconds.set((pass.nowMs - pass.startedAt) / 1000);
  return { checked, repaired, passEnded: cursor === undefined };
}

/**
 * Most open dispatches one read of the walk takes: a large page is read in parts, so that no
 * single call (a script that scans lanes of one) holds Redis for long.
 */
const READ_PART = 1_000;

/** Sweeps `count` open dispatches from `cursor`; where the pass goes on (`undefined`: it is over). */
async function sweepPart(
  ctx: RepairContext,
  cursor: string,
  count: number,
  nowMs: number,
): Promise<{ checked: number; repaired: number; next: string | undefined }> {
  const graceMs = ctx.config.repairGraceMs;
  const page = await ctx.store.open.page(cursor, count, nowMs - graceMs);
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
  const next = page.next(gone.length);
  await ctx.store.poll.moveRepairCursor(next, graceMs);
  return { checked: dispatches.length, repaired, next };
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
