import { AUTH_PROBE_BACKOFF } from '../store/store.js';
import type { DispatchRecord } from '../dispatch/record.js';
import type { RunStats } from '../store/run-history.js';
import { within } from '../time/deadline.js';
import { reportItemError } from '../runtime/store-item-error.js';
import { jitteredMs } from '../time/jitter.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { isDispatchId } from '../store/tracking.js';
import { claimedIds } from '../store/jobs.js';
import { withTraceparent } from '../telemetry/trace-context.js';
import { pollOne, type TickContext } from './read.js';

/**
 * The reads of a tick: due dispatches are claimed in batches (`tick.ts`), and `POLL_CONCURRENCY`
 * lanes read them one after another. The tick claims the next batch while the lanes finish the
 * current one ({@link TakeRead}), so no lane idles until the slowest read of a batch is over, and a
 * read falling due meanwhile does not wait for it. A read's action (a RESCHEDULE or a FINISH) runs
 * on while its lane starts the next read.
 */

/**
 * How long a lane waits for one status read before it moves on. A read that hangs (up to its
 * timeout) then finishes on its own, still claimed, and holds up no other agent job's event.
 * @defaultValue 1 s
 */
const READ_WAIT_MS = 1_000;

/**
 * Actions (RESCHEDULE, FINISH) a lane leaves running while it reads on. While the machine is busy
 * a Redis round trip can take longer than a GET; a few in flight per lane keep the reads going.
 */
const WRITES_IN_FLIGHT = 4;

/**
 * The dispatches this poller process is reading (the GET and its action), by store: a read the
 * lane stopped waiting for ({@link READ_WAIT_MS}) runs on past its tick.
 */
const underWay = new WeakMap<object, Set<string>>();

function readsUnderWay(ctx: TickContext): Set<string> {
  let reading = underWay.get(ctx.store);
  if (!reading) underWay.set(ctx.store, (reading = new Set()));
  return reading;
}

/**
 * Where a lane takes its next read from (the tick's claims: the current batch, then the next
 * claim); `undefined`: the tick reads no more.
 */
export type TakeRead = () => Promise<{ batch: Batch; index: number } | undefined>;

/** What one tick's lanes did, for logs and tests. */
export interface ReadCounts {
  reads: number;
  finished: number;
}

/** One claimed batch of due dispatches, with what its reads share (see `prepareBatch`). */
export interface Batch {
  readonly ids: readonly string[];
  readonly records: readonly (DispatchRecord | undefined)[];
  /** Redis's time of the claim: what each read decides by. */
  readonly nowMs: number;
  readonly parkedUntil: ReadonlyMap<string, number>;
  /** Each project's run history, where it has one: it shapes the reads of its runs. */
  readonly runs: ReadonlyMap<string, RunStats>;
  /** Whether sends are paused for the key (the tick's); a read can turn it on or off. */
  readonly pause: { on: boolean };
  /** While the key is rejected: no read is the batch's probe yet (reads only as the probe). */
  probing: boolean;
}

/**
 * One lane: reads dispatches from `take` one at a time until the tick reads no more. A read's
 * action overlaps the lane's next reads ({@link WRITES_IN_FLIGHT}); the lane ends once its
 * actions are over.
 */
export async function readLane(
  ctx: TickContext,
  take: TakeRead,
  counts: ReadCounts,
): Promise<void> {
  const pausedReadDelayMs = Math.min(ctx.config.pollMaxIntervalMs, AUTH_PROBE_BACKOFF.maxBackoffMs);
  const writes: Promise<void>[] = [];
  const read = await readFrom(ctx, take, counts, writes, pausedReadDelayMs).then(
    () => undefined,
    (err: unknown) => ({ err }),
  );
  // However the lane ends, its actions are over before the tick releases its lock; the lane's
  // failure, else the first action's, fails the tick.
  const ended = await Promise.allSettled(writes);
  if (read) throw read.err;
  const failed = ended.find((w) => w.status === 'rejected');
  if (failed) throw failed.reason;
}

/** The loop of {@link readLane}: `writes` holds the actions it left running. */
async function readFrom(
  ctx: TickContext,
  take: TakeRead,
  counts: ReadCounts,
  writes: Promise<void>[],
  pausedReadDelayMs: number,
): Promise<void> {
  const reading = readsUnderWay(ctx);
  for (let taken = await take(); taken; taken = await take()) {
    const { batch, index } = taken;
    const record = batch.records[index];
    if (!record) {
      // Tracked but no record (lost, or expired while tracked): it ends with its orphan event,
      // which takes it out of the tracked set and its project's count of sent ones.
      const dispatchId = batch.ids[index] as string;
      if (!isDispatchId(dispatchId)) {
        // Written by hand or by another program: no follow-up to end, no event to publish.
        ctx.logger.warn({ dispatchId, reason: 'not a dispatch id' }, LIFECYCLE.followupVanished);
        await ctx.store.tracking.untrack(dispatchId);
        continue;
      }
      // Its BullMQ job's payload, if still kept, names its project and lane (as the repair
      // sweep's orphan does): a creation's event is then job.undeliverable.
      const job = await ctx.queue.getJob(dispatchId).catch(() => undefined);
      const ids = job ? claimedIds(job) : { dispatchId };
      const orphan = { ...ids, bullJobId: dispatchId, dispatchId };
      await ctx.store.tracking.publishOrphan(orphan, ids, 'missing_record');
      continue;
    }
    const parked = batch.parkedUntil.get(record.projectId);
    if (parked && parked > batch.nowMs) {
      // Jittered: the project's parked reads do not all come back in the park's last instant.
      await ctx.store.tracking.reschedule(record.dispatchId, jitteredMs(parked - batch.nowMs));
      continue;
    }
    if (batch.pause.on && batch.probing) {
      // One read per batch tries the key while it is rejected; the others wait, unread.
      await ctx.store.tracking.reschedule(record.dispatchId, jitteredMs(pausedReadDelayMs));
      continue;
    }
    if (reading.has(record.dispatchId)) {
      // A read of it from an earlier claim is still under way: a worker's MARK_SENT moved its
      // next read ahead and cut that claim's lease short. That read acts on it; this one would
      // only repeat the GET and, on a terminal status, the FINISH. Looked at again soon.
      await ctx.store.tracking.reschedule(
        record.dispatchId,
        jitteredMs(ctx.config.pollMinIntervalMs),
      );
      continue;
    }
    batch.probing = batch.pause.on;
    counts.reads++;
    // In the follow-up's trace: the status read and the FINISH join the producer's trace.
    const read = withTraceparent(record.traceparent, () =>
      pollOne(ctx, record, batch.nowMs, batch.pause, batch.runs.get(record.projectId)),
    );
    const written = read
      .then(({ acted }) => acted)
      .then((ended) => {
        if (ended) counts.finished++;
      })
      // A RESCHEDULE or FINISH that failed for this follow-up alone (a broken key): reported; it
      // stays due and is read again until an operator repairs the key.
      .catch((err: unknown) => {
        if (!reportItemError(ctx, err, record)) throw err;
      });
    reading.add(record.dispatchId);
    // Awaited below, or logged when the lane moves on without it: never an unhandled rejection.
    written.catch(() => {}).finally(() => reading.delete(record.dispatchId));
    const waited = await within(
      read.then(() => true),
      READ_WAIT_MS,
      () => false,
    );
    if (!waited) {
      written.catch((err: unknown) =>
        ctx.logger.warn({ err, dispatchId: record.dispatchId }, LIFECYCLE.pollError),
      );
      continue;
    }
    // The read is over: its action (a RESCHEDULE or a FINISH) goes on while the lane reads on.
    writes.push(written);
    if (writes.length > WRITES_IN_FLIGHT) await writes.shift();
  }
}
