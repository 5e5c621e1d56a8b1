import { randomUUID } from 'node:crypto';
import { configRejectionStatus, isAgentApiError, statusKind } from '../agent-api/index.js';
import type { Config } from '../config/index.js';
import { pauseSends, resumeSends } from '../runtime/auth-pause.js';
import type { DispatchRecord } from '../dispatch/record.js';
import { AUTH_PROBE_BACKOFF } from '../dispatch/store.js';
import { addDispatchJob } from '../runtime/jobs.js';
import { endDispatch, type RoleContext } from '../runtime/role.js';
import { within } from '../runtime/deadline.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { actionForRead, type Action, type Observation } from './read-action.js';
import { sweepLostJobs } from './repair.js';

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

const RELEASE_LOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const RENEW_LOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;

/** What one tick did, for logs and tests. */
export interface TickResult {
  readonly ran: boolean;
  readonly reads: number;
  readonly finished: number;
}

/** Runs one poll tick, unless another poller's tick holds the lock. */
export async function runTick(ctx: RoleContext): Promise<TickResult> {
  const { redis, keys } = ctx.store;
  const token = randomUUID();
  const lockMs = lockMsOf(ctx.config.pollIntervalMs);
  if ((await redis.set(keys.pollLock, token, 'PX', lockMs, 'NX')) !== 'OK') {
    ctx.metrics.pollTicks.inc({ outcome: 'skipped' });
    return { ran: false, reads: 0, finished: 0 };
  }
  const started = Date.now();
  let reads = 0;
  let finished = 0;
  try {
    for (;;) {
      const { nowMs, ids } = await ctx.store.due(BATCH_SIZE, leaseMsOf(ctx.config));
      if (ids.length === 0) break;
      const result = await pollBatch(ctx, ids, nowMs);
      reads += result.reads;
      finished += result.finished;
      if (ids.length < BATCH_SIZE || Date.now() - started > lockMs / 2) break;
      await redis.eval(RENEW_LOCK, 1, keys.pollLock, token, lockMs);
    }
    await sweepLostJobs(ctx).catch((err: unknown) => ctx.logger.warn({ err }, LIFECYCLE.pollError));
    ctx.metrics.pollTicks.inc({ outcome: 'ran' });
  } catch (err) {
    ctx.metrics.pollTicks.inc({ outcome: 'error' });
    throw err;
  } finally {
    await redis.eval(RELEASE_LOCK, 1, keys.pollLock, token).catch(() => {});
  }
  ctx.logger.debug({ reads, finished, ms: Date.now() - started }, LIFECYCLE.pollTick);
  return { ran: true, reads, finished };
}

/** Reads and acts on one batch of due dispatches, `POLL_CONCURRENCY` reads at a time. */
async function pollBatch(
  ctx: RoleContext,
  ids: readonly string[],
  nowMs: number,
): Promise<TickResult> {
  const records = await ctx.store.getMany(ids);
  const parkedUntil = await projectParks(ctx, records);
  // While the key is rejected, read only as the fleet's probe (with the key file's current key);
  // a read answered with anything but a rejection ends the pause.
  const claim = await ctx.store.claimProbe();
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
        await ctx.store.redis.zrem(ctx.store.keys.tracked, ids[i] as string);
        continue;
      }
      const parked = parkedUntil.get(record.projectId);
      if (parked && parked > nowMs) {
        await ctx.store.reschedule(record.dispatchId, parked - nowMs);
        continue;
      }
      if (pause.on && probing) {
        // One read per batch tries the key while it is rejected; the others wait, unread.
        await ctx.store.reschedule(record.dispatchId, pausedReadDelayMs);
        continue;
      }
      probing = pause.on;
      reads++;
      const read = pollOne(ctx, record, nowMs, pause).then((ended) => {
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

/** Projects whose status reads are backed off (a GET answered 429 or 5xx), with until when. */
async function projectParks(
  ctx: RoleContext,
  records: readonly (DispatchRecord | undefined)[],
): Promise<Map<string, number>> {
  const projects = [...new Set(records.flatMap((r) => (r ? [r.projectId] : [])))];
  if (projects.length === 0) return new Map();
  const values = await ctx.store.redis.mget(...projects.map((p) => ctx.store.keys.pollPark(p)));
  return new Map(projects.map((p, i) => [p, Number(values[i] ?? 0)]));
}

/** Reads one dispatch's job and acts on what it shows. Resolves to whether the dispatch ended. */
async function pollOne(
  ctx: RoleContext,
  record: DispatchRecord,
  nowMs: number,
  pause: { on: boolean },
): Promise<boolean> {
  const started = performance.now();
  let seen: Observation;
  try {
    seen = { kind: 'job', job: await ctx.api.getJob(record.projectId, record.jobId) };
    ctx.metrics.apiLatency.observe(
      { operation: 'get', outcome: 'ok' },
      (performance.now() - started) / 1000,
    );
  } catch (error) {
    seen = { kind: 'error', error };
    const code = (error as { code?: unknown }).code;
    ctx.metrics.apiLatency.observe(
      { operation: 'get', outcome: typeof code === 'string' ? code : 'error' },
      (performance.now() - started) / 1000,
    );
  }
  await pauseOrResume(ctx, seen, pause);
  const action = actionForRead(record, seen, nowMs, ctx.config);
  countRead(ctx, seen, action);
  return act(ctx, record, action, seen);
}

/** A read rejected for the key or the URL pauses every send; an answered read ends a pause. */
async function pauseOrResume(
  ctx: RoleContext,
  seen: Observation,
  pause: { on: boolean },
): Promise<void> {
  const rejected = seen.kind === 'error' ? configRejectionStatus(seen.error) : undefined;
  if (rejected !== undefined) {
    if (!pause.on) await pauseSends(ctx.store, rejected, ctx.logger);
    pause.on = true;
    return;
  }
  const answered =
    seen.kind === 'job' || (isAgentApiError(seen.error) && seen.error.httpStatus !== undefined);
  if (pause.on && answered) {
    pause.on = false;
    await resumeSends(ctx.store, ctx.logger);
  }
}

async function act(
  ctx: RoleContext,
  record: DispatchRecord,
  action: Action,
  seen: Observation,
): Promise<boolean> {
  const log = ctx.logger.child({
    dispatchId: record.dispatchId,
    projectId: record.projectId,
    jobId: record.jobId,
  });
  switch (action.kind) {
    case 'reschedule':
      if (
        seen.kind === 'job' &&
        statusKind(seen.job.status) === 'unknown' &&
        seen.job.status !== record.lastStatus
      ) {
        // Tolerated and logged once per change; the dispatch stays tracked.
        log.warn({ status: seen.job.status }, LIFECYCLE.followupUnknownStatus);
      }
      await ctx.store.reschedule(record.dispatchId, action.delayMs, action.fields);
      return false;
    case 'backoff': {
      const until = Date.now() + action.delayMs;
      await ctx.store.redis.set(
        ctx.store.keys.pollPark(record.projectId),
        until,
        'PX',
        action.delayMs,
      );
      log.warn(
        { err: seen.kind === 'error' ? seen.error : undefined, delayMs: action.delayMs },
        LIFECYCLE.pollError,
      );
      await ctx.store.reschedule(record.dispatchId, action.delayMs);
      return false;
    }
    case 'resend':
      return resend(ctx, record, log);
    case 'finish': {
      const finished = await endDispatch(ctx, record, action.ending, record.state);
      if (finished) {
        log.info(
          { type: action.ending.type, reason: action.ending.reason },
          LIFECYCLE.followupFinished,
        );
      }
      return finished;
    }
  }
}

/**
 * The operator opted in to resending what could not be settled: queue it again, as a new BullMQ
 * job whose id is fixed by the attempt, so adding it again (after a crash between the two steps,
 * the next tick does) is a no-op. The record stays tracked until a worker takes it.
 */
async function resend(ctx: RoleContext, record: DispatchRecord, log: Logger): Promise<boolean> {
  if (
    record.state === 'unsettled' &&
    typeof (await ctx.store.requeue(record, record.attempts, record.attemptToken ?? '', false)) !==
      'number'
  ) {
    return false;
  }
  const jobId = `${record.dispatchId}-r${record.attempts}`;
  // Named on the record first, so the repair sweep checks this job, not the first one.
  await ctx.store.carry(record.dispatchId, '', jobId);
  await addDispatchJob(ctx.queue, record, jobId, ctx.config.sendAttempts);
  await ctx.store.reschedule(record.dispatchId, ctx.config.pollMaxIntervalMs);
  log.warn({ attempts: record.attempts }, LIFECYCLE.followupRetry);
  return false;
}

function countRead(ctx: RoleContext, seen: Observation, action: Action): void {
  let outcome: string = statusKind(seen.kind === 'job' ? seen.job.status : undefined);
  if (seen.kind === 'error') outcome = action.kind === 'finish' ? 'not_found' : 'error';
  ctx.metrics.statusReads.inc({ outcome });
}
