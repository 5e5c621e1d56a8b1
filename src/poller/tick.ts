import { randomUUID } from 'node:crypto';
import type { Config } from '../config/index.js';
import { sleep } from '../time/deadline.js';
import { LIFECYCLE } from '../telemetry/names.js';
import type { Claim, ClaimLock } from '../store/store.js';
import { readLane, type Batch, type ReadCounts } from './lane.js';
import type { TickContext } from './read.js';
import { sweepLostJobs } from './repair.js';

export type { TickContext } from './read.js';

/** What one tick did, for logs and tests. */
export interface TickResult {
  readonly ran: boolean;
  readonly reads: number;
  readonly finished: number;
}

/**
 * Bounds of one tick. A tick claims at most `BATCH_SIZE` due dispatches at a time, the next batch
 * while the lanes read the current one, and claims no new batch after half its lock's time: what
 * is left is due at the next tick, which the lock keeps from overlapping this one. The lock lasts
 * ten poll intervals (2 to 30 s), renewed per batch: long enough for a slow batch, short enough
 * that a poller killed mid-tick holds up the others only briefly.
 */
const BATCH_SIZE = 500;

/** A claimed dispatch stays claimed past any read: connect, headers and body timeouts, and slack. */
const leaseMsOf = (config: Config) => config.connectTimeoutMs + 2 * config.sendTimeoutMs + 5_000;
const lockMsOf = (pollIntervalMs: number) => Math.min(30_000, Math.max(2_000, pollIntervalMs * 10));

/**
 * At the end of a tick, the time in which it starts no new wait for the due set: at most this
 * share of `POLL_INTERVAL`, and at most {@link HANDOVER_MS}. The next tick waits for the lock
 * while this one ends its reads, so what falls due meanwhile is read as soon as it takes it.
 */
const TICK_MARGIN = 0.1;
/** The most a tick stops early, and the longest wait between two looks at a lock held. */
const HANDOVER_MS = 50;
/** The first wait before a lock held is looked at again; each next one twice as long. */
const HANDOVER_FIRST_WAIT_MS = 10;
/** Shortest wait between two looks at the due set within a tick. */
const MIN_WAIT_MS = 10;

/**
 * Runs one poll tick, unless another poller's tick holds the lock (its first claim takes it) until
 * this one's time is up. The tick reads what is due, then keeps reading what falls due until
 * shortly before the next tick (`POLL_INTERVAL`), sleeping until the earliest tracked read but at
 * most `POLL_MIN_INTERVAL` (a send tracked meanwhile is first read at least that far ahead): a read
 * happens when it is due, not at the next tick, so the first reads after a send, the ones that
 * catch a quick run while it is active, are on time. Idle, that is one look at the due set per
 * `POLL_MIN_INTERVAL`. A tick that finds the lock held (the one before still ends its last reads,
 * or its repair sweep) looks again every few ms until it takes it, then reads until its own end:
 * between two ticks, a due read waits only that long. `stopping` says the role is closing: no
 * more waits.
 */
export async function runTick(
  ctx: TickContext,
  stopping: () => boolean = () => false,
): Promise<TickResult> {
  const calledAt = Date.now();
  const token = randomUUID();
  const { pollIntervalMs } = ctx.config;
  const lockMs = lockMsOf(pollIntervalMs);
  // The next tick must find the lock free soon after it is due: stop waiting a little before.
  // Reads end by the tick's own time, however late it took the lock, so ticks do not drift; nor
  // past half the lock's time, which only a batch renews.
  const marginMs = Math.min(pollIntervalMs * TICK_MARGIN, HANDOVER_MS);
  const readUntil = calledAt + Math.min(pollIntervalMs - marginMs, lockMs / 2);
  const bounds = { token, lockMs, readUntil };
  let feed = new DueFeed(ctx, bounds, stopping);
  for (let waitMs = HANDOVER_FIRST_WAIT_MS; !(await feed.start());) {
    // Skipped when its time is up, or told to stop, also while it slept: it looks no more.
    if (stopping() || Date.now() + waitMs > readUntil || (await sleep(waitMs).then(stopping))) {
      ctx.metrics.pollTicks.inc({ outcome: 'skipped' });
      return { ran: false, reads: 0, finished: 0 };
    }
    waitMs = Math.min(2 * waitMs, HANDOVER_MS);
    feed = new DueFeed(ctx, bounds, stopping);
  }
  const counts: ReadCounts = { reads: 0, finished: 0 };
  try {
    const lanes = await Promise.allSettled(
      Array.from({ length: ctx.config.pollConcurrency }, () =>
        readLane(ctx, () => feed.take(), counts).catch((err: unknown) => {
          feed.end();
          throw err;
        }),
      ),
    );
    // A failed lane ends the tick's claims; every lane has stopped before the lock is released,
    // then the first failure fails the tick.
    for (const lane of lanes) if (lane.status === 'rejected') throw lane.reason;
    await sweepLostJobs(ctx).catch((err: unknown) => ctx.logger.warn({ err }, LIFECYCLE.pollError));
    ctx.metrics.pollTicks.inc({ outcome: 'ran' });
  } catch (err) {
    ctx.metrics.pollTicks.inc({ outcome: 'error' });
    throw err;
  } finally {
    await ctx.store.poll.releaseLock(token).catch(() => {});
  }
  const { reads, finished } = counts;
  ctx.logger.debug({ reads, finished, ms: Date.now() - feed.started }, LIFECYCLE.pollTick);
  return { ran: true, reads, finished };
}

/** The lock and the time bounds of one tick. */
interface TickBounds {
  readonly token: string;
  readonly lockMs: number;
  /** No wait for the due set goes past this time (ms since the epoch). */
  readonly readUntil: number;
}

/**
 * The tick's claims: the lanes' next read, from the batches claimed (`prepareBatch`), oldest first.
 * The next claim starts as soon as the lanes read the last batch claimed, so that it is ready when
 * they run out (a claim is five Redis round trips in a row); one claim at a time, awaited by every
 * lane that runs out meanwhile. Once the tick claims no more (its time is up, it is stopping, or a
 * claim failed), the lanes read what is claimed and end.
 */
class DueFeed {
  /** The batches claimed, each with the index of its next dispatch no lane has started. */
  readonly #batches: { batch: Batch; next: number }[] = [];
  /** Whether sends are paused for the key, as this tick knows it (see `prepareBatch`). */
  readonly #pause = { on: false };
  #claiming: Promise<void> | undefined;
  #over = false;
  #failure: { err: unknown } | undefined;
  /** A batch was claimed since the lock was last renewed. */
  #claimed = false;
  /** When the tick's first claim took its lock; `undefined`: not (yet). */
  #lockedAt: number | undefined;

  readonly #ctx: TickContext;
  readonly #bounds: TickBounds;
  readonly #stopping: () => boolean;

  constructor(ctx: TickContext, bounds: TickBounds, stopping: () => boolean) {
    this.#ctx = ctx;
    this.#bounds = bounds;
    this.#stopping = stopping;
  }

  /**
   * Makes the tick's first claim, which takes the tick's lock: `false` when another tick holds it.
   * A failure before the lock was taken fails the tick at once; one after it, the lanes' reads.
   */
  async start(): Promise<boolean> {
    await this.#claimNext();
    if (this.#lockedAt === undefined && this.#failure) throw this.#failure.err;
    return this.#lockedAt !== undefined;
  }

  /** When the tick took its lock (now, if it has not). */
  get started(): number {
    return this.#lockedAt ?? Date.now();
  }

  /** The lanes' next read ({@link TakeRead}). */
  async take(): Promise<{ batch: Batch; index: number } | undefined> {
    for (;;) {
      for (let claimed = this.#batches[0]; claimed; claimed = this.#batches[0]) {
        if (claimed.next >= claimed.batch.ids.length) {
          this.#batches.shift();
          continue;
        }
        if (this.#batches.length === 1) void this.#claimNext();
        return { batch: claimed.batch, index: claimed.next++ };
      }
      if (this.#failure) throw this.#failure.err;
      if (this.#over) return undefined;
      await this.#claimNext();
    }
  }

  /** The claim under way, or a new one; it never rejects: a failure ends the claims. */
  #claimNext(): Promise<void> {
    if (this.#over) return Promise.resolve();
    this.#claiming ??= this.#claim().then(
      () => {
        this.#claiming = undefined;
      },
      (err: unknown) => {
        this.#failure = { err };
        this.end();
      },
    );
    return this.#claiming;
  }

  /** Claims the next batch, waiting for one to fall due while the tick's time allows. */
  async #claim(): Promise<void> {
    const ctx = this.#ctx;
    const bounds = this.#bounds;
    for (;;) {
      let step: ClaimLock['step'] | undefined = this.#lockedAt === undefined ? 'take' : undefined;
      if (this.#claimed) {
        if (Date.now() - this.started > bounds.lockMs / 2) return this.end();
        step = 'renew';
        this.#claimed = false;
      }
      const { token, lockMs } = bounds;
      const onTaken = () => (this.#lockedAt = Date.now());
      const lock = step && { token, lockMs, step, onTaken };
      const claim = await ctx.store.poll.claim(BATCH_SIZE, leaseMsOf(ctx.config), lock);
      if (!claim) return this.end();
      const { nowMs, ids, nextDueMs } = claim;
      if (ids.length > 0) {
        this.#batches.push({ batch: await prepareBatch(ctx, claim, this.#pause), next: 0 });
        this.#claimed = true;
        return;
      }
      if (this.#stopping()) return this.end();
      const waitMs = Math.max(
        MIN_WAIT_MS,
        Math.min((nextDueMs ?? Infinity) - nowMs, ctx.config.pollMinIntervalMs),
      );
      if (Date.now() + waitMs > bounds.readUntil) return this.end();
      await sleep(waitMs);
    }
  }

  /** Claims no more: the lanes read what is claimed, then end. */
  end(): void {
    this.#over = true;
  }
}

/**
 * What a claimed batch's reads share besides its records and parks (`PollState.claim`). `pause` is
 * the tick's, shared by its batches: a batch is claimed while the lanes still read the one before,
 * so a read of that one may end the pause (or start it) after this claim asked; every batch then
 * sees it.
 */
async function prepareBatch(
  ctx: TickContext,
  { ids, records, nowMs, parkedUntil, runs }: Claim,
  pause: { on: boolean },
): Promise<Batch> {
  // While the key is rejected, read only as the fleet's probe (with the key file's current key);
  // a read answered with anything but a rejection ends the pause.
  const probe = await ctx.store.pause.claimProbe();
  if (probe === 'probe') ctx.refreshKey();
  // A `none` never turns the tick's pause off: a read of this tick may have started the pause
  // after the claim asked. Only an answered read ends it (see `pollOne`).
  if (probe !== 'none') pause.on = true;
  // Before the probe time, no read at all: the fleet's one probe per backoff holds for reads too.
  return { ids, records, nowMs, parkedUntil, runs, pause, probing: probe === 'wait' };
}
