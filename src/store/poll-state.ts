import { parseRunStats, recordRun, type RunStats, type SeenRun } from './run-history.js';
import { FIELDS_BUT_PROMPT, parseRecord, type DispatchRecord } from '../dispatch/record.js';
import type { StoreState } from './store-state.js';
import {
  moveRepairCursor,
  openEstimate,
  startRepairPass,
  type RepairMove,
  type RepairPass,
} from './repair-state.js';

export type { RepairMove, RepairPass } from './repair-state.js';

/**
 * The poller's own state in the store: the lock that keeps poll ticks from overlapping across
 * pollers, its claims of the tracked dispatches due for a read, where the repair sweep's pass
 * stands, whether the BullMQ jobs of open dispatches still exist, and the status-read parks of
 * projects. Reached as `DispatchStore.poll`.
 */

/** Where a dispatch's BullMQ job is: waiting/delayed/active, ended, or gone. */
export type JobPresence = 'live' | 'ended' | 'missing';

/** Dispatches claimed for a read, by Redis's clock, and when the next tracked one falls due. */
export interface DueReads {
  readonly nowMs: number;
  readonly ids: string[];
  /** When the earliest dispatch still tracked falls due; `undefined`: none is tracked. */
  readonly nextDueMs: number | undefined;
}

/** A claimed batch: the due dispatches, their records (all but prompts), their projects' parks. */
export interface Claim extends DueReads {
  readonly records: readonly (DispatchRecord | undefined)[];
  /** Until when each project's status reads are parked (0: not parked). */
  readonly parkedUntil: ReadonlyMap<string, number>;
  /** Each project's run history, where it has one (see run-history.ts). */
  readonly runs: ReadonlyMap<string, RunStats>;
}

/** The tick's lock at a claim: taken by the tick's first claim, renewed by a later one. */
export interface ClaimLock {
  readonly token: string;
  readonly lockMs: number;
  readonly step: 'take' | 'renew';
  /** Called as soon as the lock is taken, before the claim's other steps (which may fail). */
  readonly onTaken?: () => void;
}

/** BullMQ's key of the dispatch queue for a name (`Queue.toKey`). */
export type QueueKey = (name: string) => string;

/** The poller's state of one store: `DispatchStore.poll`. */
export class PollState {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /** Takes the poll tick's lock for `lockMs` as `token`, unless another tick holds it. */
  async takeLock(token: string, lockMs: number): Promise<boolean> {
    const state = this.#state;
    return (await state.redis.set(state.keys.pollLock, token, 'PX', lockMs, 'NX')) === 'OK';
  }

  /** Extends the poll tick's lock, if `token` still holds it. */
  async renewLock(token: string, lockMs: number): Promise<boolean> {
    const state = this.#state;
    return (await state.scripts.run('renewLock', [state.keys.pollLock], [token, lockMs])) === 1;
  }

  /** Releases the poll tick's lock, if `token` still holds it. */
  async releaseLock(token: string): Promise<boolean> {
    const state = this.#state;
    return (await state.scripts.run('releaseLock', [state.keys.pollLock], [token])) === 1;
  }

  /**
   * One claim of a poll tick: first the tick's lock (`lock`: take it, or renew it; `undefined`
   * when another tick holds it), then at most `limit` due dispatches for `leaseMs` (DUE),
   * with their records and their projects' read parks and run histories.
   */
  async claim(limit: number, leaseMs: number, lock?: ClaimLock): Promise<Claim | undefined> {
    if (lock?.step === 'take') {
      if (!(await this.takeLock(lock.token, lock.lockMs))) return undefined;
      lock.onTaken?.();
    }
    // A lock that lapsed while the tick read (a read slower than the lock lasts) is taken again
    // if free; held by another tick by then, this one claims no more.
    if (lock?.step === 'renew' && !(await this.renewLock(lock.token, lock.lockMs))) {
      if (!(await this.takeLock(lock.token, lock.lockMs))) return undefined;
    }
    const due = await this.due(limit, leaseMs);
    const records = await readRecords(this.#state, due.ids);
    const projects = new Set(records.flatMap((r) => (r ? [r.projectId] : [])));
    const { parkedUntil, runs } = await this.projectReads([...projects]);
    return { ...due, records, parkedUntil, runs };
  }

  /** Until when each project's status reads are backed off (0: not), and its run history. */
  async projectReads(
    projectIds: readonly string[],
  ): Promise<{ parkedUntil: Map<string, number>; runs: Map<string, RunStats> }> {
    const state = this.#state;
    if (projectIds.length === 0) return { parkedUntil: new Map(), runs: new Map() };
    const keys = projectIds.flatMap((p) => [state.keys.pollPark(p), state.keys.runs(p)]);
    const values = await state.redis.mget(...keys);
    const parkedUntil = new Map<string, number>();
    const runs = new Map<string, RunStats>();
    projectIds.forEach((p, i) => {
      parkedUntil.set(p, Number(values[2 * i] ?? 0));
      const stats = parseRunStats(values[2 * i + 1]);
      if (stats) runs.set(p, stats);
    });
    return { parkedUntil, runs };
  }

  /** Folds a run of `projectId` into its history: seen ended, or still going past its window. */
  async recordRun(projectId: string, run: SeenRun): Promise<RunStats | undefined> {
    return recordRun(this.#state, projectId, run);
  }

  /** Claims at most `limit` tracked dispatches due for a read, for `leaseMs` (see DueReads). */
  async due(limit: number, leaseMs: number): Promise<DueReads> {
    const state = this.#state;
    const reply = await state.scripts.run(
      'due',
      [state.keys.tracked],
      [limit, Math.round(leaseMs)],
    );
    const [now, nextAt, ...ids] = reply as [number, number, ...string[]];
    state.clock.saw(now);
    return { nowMs: now, ids, nextDueMs: nextAt < 0 ? undefined : nextAt };
  }

  /** The running repair pass, or a new one when one is due ({@link startRepairPass}). */
  async startRepairPass(graceMs: number): Promise<RepairPass | undefined> {
    return startRepairPass(this.#state, graceMs);
  }

  /** About how many are open ({@link openEstimate}). */
  async openEstimate(): Promise<number> {
    return openEstimate(this.#state);
  }

  /** Moves the repair pass on, or ends it, if it is still the caller's ({@link moveRepairCursor}). */
  async moveRepairCursor(move: RepairMove, graceMs: number): Promise<boolean> {
    return moveRepairCursor(this.#state, move, graceMs);
  }

  /**
   * Whether each BullMQ job exists and has not ended (in the completed or failed set since before
   * `endedBy`), in one pipeline. `queueKey` is the dispatch queue's `toKey`.
   */
  async jobPresence(
    queueKey: QueueKey,
    bullJobIds: readonly string[],
    endedBy: number,
  ): Promise<JobPresence[]> {
    const state = this.#state;
    if (bullJobIds.length === 0) return [];
    const pipeline = state.redis.pipeline();
    for (const bullJobId of bullJobIds) {
      pipeline.exists(queueKey(bullJobId));
      pipeline.zscore(queueKey('completed'), bullJobId);
      pipeline.zscore(queueKey('failed'), bullJobId);
    }
    const replies = (await pipeline.exec()) ?? [];
    return bullJobIds.map((_, i) => {
      const [exists, completed, failed] = [0, 1, 2].map((k) => {
        const [err, value] = replies[3 * i + k] ?? [new Error('no reply'), null];
        if (err) throw err;
        return value;
      });
      if (exists !== 1) return 'missing';
      const endedAt = Number(completed ?? failed ?? Infinity);
      return endedAt <= endedBy ? 'ended' : 'live';
    });
  }

  /** Backs off a project's status reads for `delayMs` (a GET answered 429 or 5xx). */
  async parkPolls(projectId: string, delayMs: number): Promise<void> {
    const state = this.#state;
    await state.redis.set(state.keys.pollPark(projectId), Date.now() + delayMs, 'PX', delayMs);
  }
}

/**
 * Reads several records in one round trip, all but their prompts; missing: `undefined`. The tick's
 * claim reads what fell due so; `DispatchStore.sends.getMany` too.
 */
export async function readRecords(
  state: StoreState,
  ids: readonly string[],
): Promise<(DispatchRecord | undefined)[]> {
  if (ids.length === 0) return [];
  const pipeline = state.redis.pipeline();
  for (const id of ids) pipeline.hmget(state.keys.dispatch(id), ...FIELDS_BUT_PROMPT);
  const replies = (await pipeline.exec()) ?? [];
  return ids.map((id, i) => {
    const [err, values] = replies[i] ?? [null, []];
    if (err) throw err;
    const hash: Record<string, string> = {};
    for (const [f, field] of FIELDS_BUT_PROMPT.entries()) {
      const value = (values as (string | null)[])[f];
      if (value !== null && value !== undefined) hash[field] = value;
    }
    return parseRecord(id, hash, false);
  });
}
