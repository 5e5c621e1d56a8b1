import type { Queue } from 'bullmq';
import type { Config } from '../config/index.js';
import type { DispatchStore, OpenDispatch, RepairPass } from '../store/store.js';
import { addDispatchJobs, freeCarryId } from '../store/jobs.js';
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
 * or a script call that scans lanes of one, a pipeline of HMGETs without the prompt, one pipeline
 * of three reads per queued one, and one `addBulk` of what it repairs). Each tick sizes its page
 * ({@link repairPage}) from the open dispatches the pass has still to read and the ticks left
 * before its planned end (one `REPAIR_GRACE` after its start), at least {@link MIN_PAGE} and at
 * most {@link MAX_PAGE}: a backlog that grows, or a page cut short, makes the later pages larger.
 * A tick stops taking parts once its sweep has used {@link REPAIR_BUDGET} of `POLL_INTERVAL`: the
 * sweep holds the tick's lock, and the next tick's reads wait for it no longer than that; what is
 * left falls to the later pages. So a lost job waits for its repair about the grace (before it is
 * looked at), the gap to the next pass (one grace) and one pass (about one grace, while the
 * backlog is at most {@link MAX_PAGE} times the ticks of a grace and each page fits the budget;
 * beyond, longer). Dispatches younger than the grace are not looked at: REGISTER and the job's
 * `add` share one MULTI, so a job is never legitimately missing for more than an instant.
 */

/** Open dispatches read per tick at least: what a small backlog costs. */
export const MIN_PAGE = 500;

/** Open dispatches read per tick at most: bounds one tick's Redis work. */
export const MAX_PAGE = 5_000;

/** Share of `POLL_INTERVAL` after which a tick's sweep takes no further part of its page. */
export const REPAIR_BUDGET = 0.15;

/** The ticks of one `REPAIR_GRACE`, POLL_INTERVAL apart (at least one). */
function ticksOfGrace(config: Pick<Config, 'repairGraceMs' | 'pollIntervalMs'>): number {
  return Math.max(1, Math.floor(config.repairGraceMs / config.pollIntervalMs));
}

/**
 * The page of a tick that has about `open` dispatches left to read in `ticks` ticks (by default
 * the ticks of one `REPAIR_GRACE`), within {@link MIN_PAGE} and {@link MAX_PAGE}.
 */
export function repairPage(
  open: number,
  config: Pick<Config, 'repairGraceMs' | 'pollIntervalMs'>,
  ticks = ticksOfGrace(config),
): number {
  return Math.min(MAX_PAGE, Math.max(MIN_PAGE, Math.ceil(open / Math.max(1, ticks))));
}

/**
 * The ticks left to a pass before its planned end, this one included: by the clock, and by the
 * ticks it has had (a sweep run more often than `POLL_INTERVAL` counts as ticks too).
 */
function ticksLeft(pass: RepairPass, config: Config): number {
  const byClock = Math.floor((pass.endsAt - pass.nowMs) / config.pollIntervalMs);
  return Math.max(1, Math.min(byClock, ticksOfGrace(config) - pass.ticks));
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
 * Sweeps one page of the open dispatches, if a pass is due or running. The page is read in parts
 * of at most {@link READ_PART}, the cursor moved after each, until the page is read or the
 * sweep has used `budgetMs` (the first part is always read). `pageFor` sizes the page from the
 * open dispatches left to read and the ticks left ({@link repairPage}; the bench compares it with
 * a fixed one).
 */
export async function sweepLostJobs(
  ctx: RepairContext,
  pageFor = (open: number, ticks: number) => repairPage(open, ctx.config, ticks),
  budgetMs = REPAIR_BUDGET * ctx.config.pollIntervalMs,
): Promise<RepairResult> {
  const { config, store } = ctx;
  const began = Date.now();
  const pass = await store.poll.startRepairPass(config.repairGraceMs);
  if (!pass) return { checked: 0, repaired: 0, passEnded: false };
  const left = Math.max(0, (await store.poll.openEstimate()) - pass.checked);
  const page = pageFor(left, ticksLeft(pass, config));
  // One part more than the page needs: the walk's switch from the open index to the lanes of
  // one ends a part short.
  const parts = Math.ceil(page / READ_PART) + 1;
  let cursor: string | undefined = pass.cursor;
  let [checked, repaired] = [0, 0];
  for (let part = 0; part < parts && cursor !== undefined && checked < page; part++) {
    if (part > 0 && Date.now() - began >= budgetMs) break;
    const count = Math.min(READ_PART, page - checked);
    const swept = await sweepPart(ctx, pass, { cursor, count, first: part === 0 });
    [checked, repaired, cursor] = [checked + swept.checked, repaired + swept.repaired, swept.next];
    // Another poller ended this pass (or began the next) meanwhile: what is left is its.
    if (!swept.moved) return { checked, repaired, passEnded: false };
  }
  return { checked, repaired, passEnded: cursor === undefined };
}

/** Most open dispatches one read of the walk takes: no one call holds Redis for long. */
const READ_PART = 1_000;

/**
 * Sweeps `count` open dispatches from `cursor` and moves the pass on, if it is still this one's
 * (`moved`); `next`: where the pass goes on (`undefined`: it is over).
 */
async function sweepPart(
  ctx: RepairContext,
  pass: RepairPass,
  at: { cursor: string; count: number; first: boolean },
): Promise<{ checked: number; repaired: number; next: string | undefined; moved: boolean }> {
  const graceMs = ctx.config.repairGraceMs;
  const page = await ctx.store.open.page(at.cursor, at.count, pass.nowMs - graceMs);
  const { dispatches } = page;

  const gone = dispatches.filter((d) => d.state === undefined || d.state === 'done');
  for (const d of gone) if (d.state === undefined) await orphaned(ctx, d);
  await ctx.store.open.drop(gone);

  const queued = dispatches.filter((d) => d.state === 'queued' && !d.resendPending);
  const presence = await ctx.store.poll.jobPresence(
    (name) => ctx.queue.toKey(name),
    queued.map((d) => d.bullJobId),
    pass.nowMs - graceMs,
  );
  const lost = queued.flatMap((d, i) =>
    presence[i] === 'live' ? [] : [{ d, ended: presence[i] === 'ended' }],
  );
  const repaired = await repairLost(ctx, lost);
  // Dropped entries shifted the open index's ranks after them down; what a shift skips, the next
  // pass sees.
  const next = page.next(gone.length);
  const move = {
    startedAt: pass.startedAt,
    cursor: next,
    checked: dispatches.length,
    tick: at.first,
  };
  const moved = await ctx.store.poll.moveRepairCursor(move, graceMs);
  return { checked: dispatches.length, repaired, next, moved };
}

/**
 * Gives queued dispatches their jobs back, in one `addBulk`. A missing job is added again under
 * its id (adding an existing id is a no-op: a rerun cannot add two). An ended job keeps its id, so
 * the new one gets the first free `<dispatchId>-f<n>`, recorded first with a compare-and-set so
 * that only one sweep adds it. Answers how many were given a job.
 */
async function repairLost(
  ctx: RepairContext,
  lost: readonly { d: OpenDispatch; ended: boolean }[],
): Promise<number> {
  const present = (ids: readonly string[]) =>
    ctx.store.poll.jobPresence((name) => ctx.queue.toKey(name), ids, Number.MAX_SAFE_INTEGER);
  const carried = await Promise.all(
    lost.map(async ({ d, ended }) => {
      if (!ended) return { d, ended, bullJobId: d.bullJobId };
      const bullJobId = await freeCarryId(present, d.dispatchId, d.repairs + 1);
      const won = await ctx.store.tracking.carry(d.dispatchId, d.bullJobId, bullJobId);
      return won ? { d, ended, bullJobId } : undefined;
    }),
  );
  const adds = carried.flatMap((a) => (a ? [a] : []));
  const jobs = adds.map(({ d, bullJobId }) => ({ ref: d, bullJobId }));
  // BullMQ's addBulk stops at its first failed add (a job key of the wrong type): the page's jobs
  // are then added one by one, so one bad key does not hold back the others nor the cursor.
  const added = await addDispatchJobs(ctx.queue, jobs, ctx.config.sendAttempts).then(
    () => adds,
    () => addEach(ctx, adds),
  );
  for (const { d, ended, bullJobId } of added) logRepair(ctx, d, ended, bullJobId);
  return added.length;
}

/** Adds each job on its own; resolves to those that went in, logs the others. */
async function addEach<A extends { d: OpenDispatch; bullJobId: string }>(
  ctx: RepairContext,
  adds: readonly A[],
): Promise<A[]> {
  const tried = await Promise.all(
    adds.map(async (a) => {
      const job = [{ ref: a.d, bullJobId: a.bullJobId }];
      return addDispatchJobs(ctx.queue, job, ctx.config.sendAttempts).then(
        () => a,
        (err: unknown) => {
          const { dispatchId } = a.d;
          ctx.logger.warn({ err, dispatchId, bullJobId: a.bullJobId }, LIFECYCLE.followupRepaired);
          return undefined;
        },
      );
    }),
  );
  return tried.flatMap((a) => (a ? [a] : []));
}

/** Counts and logs one repair. */
function logRepair(ctx: RepairContext, d: OpenDispatch, ended: boolean, bullJobId: string): void {
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
