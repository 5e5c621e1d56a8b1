import type { Redis } from 'ioredis';
import type { DiskWait } from '../redis/disk-wait.js';
import type { Keys } from '../redis/keys.js';
import type { BudgetRate } from '../dispatch/budget.js';
import type { Rate } from '../config/units.js';
import type { Scripts } from './lua.js';
import type { DispatchState } from '../dispatch/record.js';

/** Settings the store needs. */
export interface StoreOptions {
  readonly eventsStream: string;
  readonly eventsMaxLen: number;
  readonly retentionMs: number;
  /**
   * How long a follow-up that ended undeliverable or timed out keeps its prompt for a redrive
   * (`DEAD_LETTER_RETENTION`, at most `retentionMs`; 0: deleted at the end).
   * @defaultValue 7 days
   */
  readonly deadLetterRetentionMs?: number;
  /**
   * `POLL_MAX_INTERVAL`: no first read that MARK_SENT schedules is further than this from the one
   * before it (see `firstRead`). Unset: its default.
   */
  readonly pollMaxIntervalMs?: number;
  /** Largest prompt ACQUIRE lets go, in UTF-8 bytes (`PROMPT_MAX_BYTES`); unset: any but empty. */
  readonly promptMaxBytes?: number;
  /**
   * This shard's share of `ORG_RATE_LIMIT`, as the budget counts it (margin and tolerance, see
   * `budgetRate`), checked by ACQUIRE after the project's budget; unset: no org limit.
   */
  readonly orgRate?: BudgetRate | undefined;
  /**
   * `CREATE_RATE_LIMIT` as the budget counts it, when `BUDGET_SCOPE=split`: creations then count
   * in a log of their own (`Keys.createBudget`). Unset: creations and sends share one log.
   */
  readonly createRate?: BudgetRate | undefined;
  /**
   * Where a crash must not undo a write (the intent to send, a lane's release), the store waits
   * for the disk as this assessment says (WAITAOF on its connection), at most `timeoutMs`.
   * Without it, nothing is waited for.
   */
  readonly durability?: DiskWait;
  /**
   * `PROJECT_BACKLOG_MAX` (REGISTER refuses a batch that would take a project's queued follow-ups
   * past `max`) and the rate its retry estimate assumes for a project without a limit of its own
   * (`SEND_RATE_LIMIT`). Unset: no limit.
   */
  readonly backlog?: { readonly max: number; readonly rate: Rate };
}

/** What the store's modules share: its connection, keys, settings and scripts. Never exported. */
export interface StoreState {
  readonly redis: Redis;
  readonly keys: Keys;
  readonly options: StoreOptions;
  readonly scripts: Scripts;
  readonly clock: RedisClock;
}

/**
 * Redis's clock as last seen by this store: a script that reads `TIME` anyway (ACQUIRE, DUE)
 * answers its `now`, and the offset to this process's clock is kept, so a script that needs the
 * time only to schedule a status read (MARK_SENT, RESCHEDULE) is handed it instead of running
 * `TIME` itself. A read scheduled a few milliseconds off costs nothing.
 */
export class RedisClock {
  #offsetMs: number | undefined;

  /** Notes a `now` that Redis answered. */
  saw(redisNowMs: number): void {
    this.#offsetMs = redisNowMs - Date.now();
  }

  /** Redis's time `delayMs` from now; `undefined` before any `now` was seen. */
  inMs(delayMs: number): number | undefined {
    return this.#offsetMs === undefined
      ? undefined
      : Math.round(Date.now() + this.#offsetMs + delayMs);
  }
}

/** Where a dispatch's identity is: enough to build all of its keys. */
export interface DispatchRef {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
}

/** The answer of `DispatchStore.acquire`. */
export type Verdict =
  /**
   * Send now. `probe`: sends are paused and this one tries whether the key works again.
   * `writeWithinMs`: how long after the grant the request may still be written (the budget's
   * margin, less how late a reserved slot was spent); later, it must be given back unsent.
   */
  | {
      kind: 'go';
      attempt: number;
      prompt: string;
      probe: boolean;
      writeWithinMs?: number;
      /** The agent job to send to; `''`: create one (a creation). */
      to: string;
    }
  | { kind: 'blocked' }
  /** A follow-up chained to a creation that ended without a job: it ends unsent. */
  | { kind: 'no_job' }
  /** A follow-up chained to a creation whose record expired before it learned the job. */
  | { kind: 'creation_expired' }
  /** Its prompt cannot be sent (empty, or over `promptMaxBytes`): nothing was spent. */
  | { kind: 'invalid'; promptBytes: number }
  /** Its deadline (`expiresAtMs`) passed before its turn: it must end expired, unsent. */
  | { kind: 'expired'; expiresAtMs: number }
  /** The key was rejected: every send waits; the next probe may go at `untilMs`. */
  | { kind: 'auth_paused'; untilMs: number }
  /** An operator paused the project: nothing was spent; it waits for the resume. */
  | { kind: 'paused' }
  | { kind: 'parked' | 'over'; untilMs: number }
  | { kind: 'missing' }
  /** Another attempt (`attemptToken`) recorded its intent at `sendingAt`, and no outcome yet. */
  | { kind: 'sending'; sendingAt: number; attemptToken: string }
  /**
   * It could go, but Redis did not confirm the intent on disk (`REDIS_DURABILITY`): it is queued
   * again, its budget unit back, and must not be sent now. `reason` is the WAITAOF failure.
   */
  | { kind: 'not_durable'; reason: string }
  | { kind: 'not-queued'; state: DispatchState };

/**
 * What recording an attempt's outcome did: `marked` (or it already was), `moved-on` (the record is
 * in another state), `stale` (another attempt holds the intent now).
 */
export type MarkResult = 'marked' | 'moved-on' | 'stale';

/** The keys of a dispatch's lane: its project's lane heads, and the list of those behind. */
export function laneOf(
  state: StoreState,
  ref: Omit<DispatchRef, 'dispatchId'>,
): [heads: string, lane: string] {
  return [state.keys.laneHeads(ref.projectId), state.keys.lane(ref.projectId, ref.jobId)];
}

/** Redis's clock in epoch milliseconds (`TIME`), one clock for the whole fleet. */
export async function redisNow(state: StoreState): Promise<number> {
  const [seconds, micros] = await state.redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
