import { randomUUID } from 'node:crypto';
import type { Config } from '../config/index.js';
import { AUTH_PROBE_BACKOFF } from '../dispatch/store.js';
import { sleep, within } from '../runtime/deadline.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { withTraceparent } from '../telemetry/tracing.js';
import { pollOne, type TickContext } from './read.js';
import { sweepLostJobs } from './repair.js';

export type { TickContext } from './read.js';

/** What one tick did, for logs and tests. */
export interface TickResult {
  readonly ran: boolean;
  readonly reads: number;
  readonly finished: number;
}

/**
 * Bounds of one tick. A tick reads at most `BATCH_SIZE` due dispatches per batch, and starts no
 * new batch after half its lock's time: what is left is due at the next tick, which the lock
 * keeps from overlapping this one. The lock lasts ten poll intervals (2 to 30 s), renewed per
 * batch: long enough for a slow batch, short enough that a poller killed mid-tick holds up the
 * others only briefly.
 */
const BATCH_SIZE = 500;

/**
 * How long a tick waits for one status read before it moves on. A read that hangs (up to its
 * timeout) then finishes on its own, still claimed, and holds up no other agent job's event.
 * @defaultValue 1 s
 */
const READ_WAIT_MS = 1_000;

/** A claimed dispatch stays claimed past any read: connect, headers and body timeouts, and slack. */
const leaseMsOf = (config: Config) => config.connectTimeoutMs + 2 * config.sendTimeoutMs + 5_000;
const lockMsOf = (pollIntervalMs: number) => Math.min(30_000, Math.max(2_000, pollIntervalMs * 10));

/** Share of `POLL_INTERVAL` at the end of a tick in which it starts no new wait. */
const TICK_MARGIN = 0.1;
/** Shortest wait between two looks at the due set within a tick. */
const MIN_WAIT_MS = 10;

/**
 * Runs one poll tick, unless another poller's tick holds the lock. The tick reads what is due,
 * then keeps reading what falls due until shortly before the next tick (`POLL_INTERVAL`), sleeping
 * until the earliest tracked read but at most `POLL_MIN_INTERVAL` (a send tracked meanwhile is
 * first read at least that far ahead): a read happens when it is due, not at the next tick, so
 * the first reads after a send, the ones that catch a quick run while it is active, are on time.
 * Idle, that is one look at the due set per `POLL_MIN_INTERVAL`. `stopping` says the role is
 * closing: no more waits.
 */
export async function runTick(
  ctx: TickContext,
  stopping: () => boolean = () => false,
): Promise<TickResult> {
  const token = randomUUID();
  const lockMs = lockMsOf(ctx.config.pollIntervalMs);
  if (!(await ctx.store.poll.takeLock(token, lockMs))) {
    ctx.metrics.pollTicks.inc({ outcome: 'skipped' });
    return { ran: false, reads: 0, finished: 0 };
  }
  const started = Date.now();
  // The next tick must find the lock free: stop waiting a little before it is due. Nor past half
  // the lock's time, which only a batch renews.
  const readUntil = started + Math.min(ctx.config.pollIntervalMs * (1 - TICK_MARGIN), lockMs / 2);
  let reads = 0;
  let finished = 0;
  try {
    for (;;) {
      const { nowMs, ids, nextDueMs } = await ctx.store.tracking.due(
        BATCH_SIZE,
        leaseMsOf(ctx.config),
      );
      if (ids.length > 0) {
        const result = await pollBatch(ctx, ids, nowMs);
        reads += result.reads;
        finished += result.finished;
        if (Date.now() - started > lockMs / 2) break;
        await ctx.store.poll.renewLock(token, lockMs);
        if (ids.length === BATCH_SIZE) continue;
      }
      if (stopping()) break;
      const waitMs = Math.max(
        MIN_WAIT_MS,
        Math.min((nextDueMs ?? Infinity) - nowMs, ctx.config.pollMinIntervalMs),
      );
      if (Date.now() + waitMs > readUntil) break;
      await sleep(waitMs);
    }
    await sweepLostJobs(ctx).catch((err: unknown) => ctx.logger.warn({ err }, LIFECYCLE.pollError));
    ctx.metrics.pollTicks.inc({ outcome: 'ran' });
  } catch (err) {
    ctx.metrics.pollTicks.inc({ outcome: 'error' });
    throw err;
  } finally {
    await ctx.store.poll.releaseLock(token).catch(() => {});
  }
  ctx.logger.debug({ reads, finished, ms: Date.now() - started }, LIFECYCLE.pollTick);
  return { ran: true, reads, finished };
}

/** Reads and acts on one batch of due dispatches, `POLL_CONCURRENCY` reads at a time. */
async function pollBatch(
  ctx: TickContext,
  ids: readonly string[],
  nowMs: number,
): Promise<TickResult> {
  const records = await ctx.store.sends.getMany(ids);
  const parkedUntil = await ctx.store.poll.pollParks([
    ...new Set(records.flatMap((r) => (r ? [r.projectId] : []))),
  ]);
  // While the key is rejected, read only as the fleet's probe (with the key file's current key);
  // a read answered with anything but a rejection ends the pause.
  const claim = await ctx.store.pause.claimProbe();
  const pause = { on: claim !== 'none' };
  if (claim === 'probe') ctx.refreshKey();
  const pausedReadDelayMs = Math.min(ctx.config.pollMaxIntervalMs, AUTH_PROBE_BACKOFF.maxBackoffMs);
  // Before the probe time, no read at all: the fleet's one probe per backoff holds for reads too.
  let probing = claim === 'wait';
  let reads = 0;
  let finished = 0;
  let next = 0;
  const lane = async () => {
    while (next < records.length) {
      const i = next++;
      const record = records[i];
      if (!record) {
        // Tracked but no record: it expired or was never ours. Stop tracking it.
        await ctx.store.tracking.untrack(ids[i] as string);
        continue;
      }
      const parked = parkedUntil.get(record.projectId);
      if (parked && parked > nowMs) {
        await ctx.store.tracking.reschedule(record.dispatchId, parked - nowMs);
        continue;
      }
      if (pause.on && probing) {
        // One read per batch tries the key while it is rejected; the others wait, unread.
        await ctx.store.tracking.reschedule(record.dispatchId, pausedReadDelayMs);
        continue;
      }
      probing = pause.on;
      reads++;
      // In the follow-up's trace: the status read and the FINISH join the producer's trace.
      const read = withTraceparent(record.traceparent, () =>
        pollOne(ctx, record, nowMs, pause),
      ).then((ended) => {
        if (ended) finished++;
      });
      const waited = await within(
        read.then(() => true),
        READ_WAIT_MS,
        () => false,
      );
      if (!waited) {
        read.catch((err: unknown) =>
          ctx.logger.warn({ err, dispatchId: record.dispatchId }, LIFECYCLE.pollError),
        );
      }
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(ctx.config.pollConcurrency, records.length) }, lane),
  );
  return { ran: true, reads, finished };
}
