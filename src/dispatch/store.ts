import type { ChainableCommander, Redis } from 'ioredis';
import type { AgentJob } from '../agent-api/index.js';
import type { Rate } from '../config/index.js';
import type { Keys } from '../redis/keys.js';
import type { FollowUp } from './followup.js';
import {
  eventFields,
  parseRecord,
  type DispatchRecord,
  type DispatchState,
  type Ending,
} from './record.js';
import { REGISTER_SOURCE, SCRIPTS } from './script.js';

/** Where a dispatch's identity is: enough to build all of its keys. */
export interface DispatchRef {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
}

/** The answer of {@link DispatchStore.acquire}. */
export type Verdict =
  /** Send now. `probe`: sends are paused and this one tries whether the key works again. */
  | { kind: 'go'; attempt: number; prompt: string; probe: boolean }
  | { kind: 'blocked' }
  /** The key was rejected: every send waits; the next probe may go at `untilMs`. */
  | { kind: 'auth_paused'; untilMs: number }
  | { kind: 'parked' | 'over'; untilMs: number }
  | { kind: 'missing' }
  /** Another attempt recorded its intent at `sendingAt` and has not recorded an outcome. */
  | { kind: 'sending'; sendingAt: number }
  | { kind: 'not-queued'; state: DispatchState };

/**
 * Backoff of the probes while sends are paused: the first comes 1 s after the pause started, each
 * next one twice as late, at most 25 s, so a working key is in use within 30 s of being in place
 * (25 s plus a delayed job's wake-up and the probe itself).
 */
export const AUTH_PROBE_BACKOFF = { firstBackoffMs: 1_000, maxBackoffMs: 25_000 } as const;

/** The fleet-wide pause of every send, as {@link DispatchStore.sendPause} reads it. */
export interface SendPause {
  readonly sinceMs: number;
  /** The status that started it: 401 or 403 (the key), 3xx (`AGENT_API_URL`). */
  readonly httpStatus: number;
  /** When the next probe may go. */
  readonly probeAt: number;
}

/** Settings the store needs. */
export interface StoreOptions {
  readonly eventsStream: string;
  readonly eventsMaxLen: number;
  readonly retentionMs: number;
}

/**
 * The dispatch records, lanes, budgets and the tracked set: every state change of a follow-up goes
 * through here, as one atomic script.
 */
export class DispatchStore {
  constructor(
    readonly redis: Redis,
    readonly keys: Keys,
    readonly options: StoreOptions,
  ) {}

  /** Queues the registration of a follow-up on `multi` (the producer's transaction). */
  registerInto(multi: ChainableCommander, dispatchId: string, followUp: FollowUp): void {
    const keys = [
      this.keys.dispatch(dispatchId),
      this.keys.lane(followUp.projectId, followUp.jobId),
    ];
    // EVAL, not EVALSHA: inside MULTI a NOSCRIPT would fail this command alone and commit the rest.
    multi.eval(
      REGISTER_SOURCE,
      keys.length,
      ...keys,
      dispatchId,
      followUp.projectId,
      followUp.jobId,
      followUp.prompt,
      followUp.key ?? '',
      followUp.meta ? JSON.stringify(followUp.meta) : '',
    );
  }

  /** Reads one dispatch record. */
  async get(dispatchId: string): Promise<DispatchRecord | undefined> {
    return parseRecord(dispatchId, await this.redis.hgetall(this.keys.dispatch(dispatchId)));
  }

  /** Reads several dispatch records in one round trip; missing ones are `undefined`. */
  async getMany(ids: readonly string[]): Promise<(DispatchRecord | undefined)[]> {
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.keys.dispatch(id));
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((id, i) => {
      const [err, hash] = replies[i] ?? [null, {}];
      if (err) throw err;
      return parseRecord(id, hash as Record<string, string>);
    });
  }

  /**
   * Checks lane, park and budget, and when all allow it, records the intent to send and starts
   * tracking the dispatch (first read in `firstPollMs`). `toleranceMs` is how late a reserved slot
   * may still be spent (see the ACQUIRE script).
   */
  async acquire(
    ref: DispatchRef,
    rate: Rate,
    toleranceMs: number,
    firstPollMs: number,
  ): Promise<Verdict> {
    const reply = (await SCRIPTS.acquire.run(
      this.redis,
      [
        this.keys.dispatch(ref.dispatchId),
        this.lane(ref),
        this.keys.budget(ref.projectId),
        this.keys.park(ref.projectId),
        this.keys.tracked,
        this.keys.authPause,
      ],
      [ref.dispatchId, rate.max, rate.windowMs, toleranceMs, Math.max(1, Math.round(firstPollMs))],
    )) as [string, number, string, number?];
    const [kind, n, prompt, probe] = reply;
    switch (kind) {
      case 'go':
        return { kind, attempt: n, prompt, probe: probe === 1 };
      case 'blocked':
      case 'missing':
        return { kind };
      case 'auth_paused':
        return { kind, untilMs: n };
      case 'parked':
      case 'over':
        return { kind, untilMs: n };
      case 'sending':
        return { kind, sendingAt: n };
      default:
        return { kind: 'not-queued', state: kind as DispatchState };
    }
  }

  /** Records a send as done (`sent`) or of unknown outcome (`unsettled`) and starts tracking it. */
  async markSent(
    ref: DispatchRef,
    state: 'sent' | 'unsettled',
    job: AgentJob | undefined,
    firstDelayMs: number,
  ): Promise<boolean> {
    const reply = await SCRIPTS.markSent.run(
      this.redis,
      [this.keys.dispatch(ref.dispatchId), this.keys.tracked],
      [
        ref.dispatchId,
        state,
        job ? JSON.stringify(job) : '',
        job?.status ?? '',
        job?.status === 'active' ? '1' : '0',
        Math.max(1, Math.round(firstDelayMs)),
      ],
    );
    return reply === 1;
  }

  /**
   * Returns a dispatch to `queued`. `refund` when the request never left, `parkMs` to park the
   * project. Resolves to the park deadline (0 if none), or `undefined` if the state had moved on.
   */
  async requeue(
    ref: DispatchRef,
    attempt: number,
    refund: boolean,
    parkMs = 0,
  ): Promise<number | undefined> {
    const reply = (await SCRIPTS.requeue.run(
      this.redis,
      [
        this.keys.dispatch(ref.dispatchId),
        this.keys.budget(ref.projectId),
        this.keys.park(ref.projectId),
        this.keys.tracked,
      ],
      [ref.dispatchId, attempt, refund ? '1' : '0', Math.max(0, Math.round(parkMs))],
    )) as number;
    return reply < 0 ? undefined : reply;
  }

  /**
   * Ends a dispatch with its one event, if it is still in `expected` state (any state but `done`
   * when omitted). Resolves to whether this call ended it, and the lane's next dispatch.
   */
  async finish(
    record: DispatchRecord,
    ending: Ending,
    expected?: DispatchState,
  ): Promise<{ finished: boolean; nextDispatchId: string | undefined }> {
    const finishedAt = Date.now();
    const reply = (await SCRIPTS.finish.run(
      this.redis,
      [
        this.keys.dispatch(record.dispatchId),
        this.lane(record),
        this.keys.tracked,
        this.options.eventsStream,
      ],
      [
        record.dispatchId,
        expected ?? '',
        finishedAt,
        ending.type,
        ending.reason ?? '',
        this.options.retentionMs,
        this.options.eventsMaxLen,
        ...eventFields(record, ending, finishedAt),
      ],
    )) as [number, string, string];
    return { finished: reply[0] === 1, nextDispatchId: reply[1] || undefined };
  }

  /** Sets the next status read of a tracked dispatch `delayMs` ahead; stores `fields` on it. */
  async reschedule(
    dispatchId: string,
    delayMs: number,
    fields: Record<string, string | number> = {},
  ): Promise<boolean> {
    const pairs = Object.entries(fields).flat();
    const reply = await SCRIPTS.reschedule.run(
      this.redis,
      [this.keys.dispatch(dispatchId), this.keys.tracked],
      [dispatchId, Math.max(1, Math.round(delayMs)), ...pairs],
    );
    return reply === 1;
  }

  /**
   * Claims the tracked dispatches due for a status read, at most `limit`, for `leaseMs` (see the
   * DUE script), and returns them with Redis's clock.
   */
  async due(limit: number, leaseMs: number): Promise<{ nowMs: number; ids: string[] }> {
    const reply = await SCRIPTS.due.run(
      this.redis,
      [this.keys.tracked],
      [limit, Math.round(leaseMs)],
    );
    const [now, ...ids] = reply as [number, ...string[]];
    return { nowMs: now, ids };
  }

  /**
   * Pauses every send of the fleet: the agent API answered `httpStatus` (401/403: the key; 3xx:
   * `AGENT_API_URL`). `started` is true for the one call that started the pause (the one to log
   * it); `probeAt` is when the next probe may go.
   */
  async pauseSends(
    httpStatus: number,
    backoff: { firstBackoffMs: number; maxBackoffMs: number } = AUTH_PROBE_BACKOFF,
  ): Promise<{ started: boolean; probeAt: number }> {
    const reply = (await SCRIPTS.authPause.run(
      this.redis,
      [this.keys.authPause],
      [httpStatus, Math.round(backoff.firstBackoffMs), Math.round(backoff.maxBackoffMs)],
    )) as [number, number];
    return { started: reply[0] === 1, probeAt: reply[1] };
  }

  /** Ends the pause of every send (the key works again). Resolves to whether it was paused. */
  async resumeSends(): Promise<boolean> {
    return (await this.redis.del(this.keys.authPause)) === 1;
  }

  /**
   * For a status read while sends are paused: `none` (not paused), `wait` (not the probe time
   * yet), or `probe` (this caller probes, and the next probe time moves ahead, as for a send).
   */
  async claimProbe(): Promise<'none' | 'wait' | 'probe'> {
    const reply = await SCRIPTS.claimProbe.run(this.redis, [this.keys.authPause], []);
    return reply === 1 ? 'probe' : reply === 0 ? 'wait' : 'none';
  }

  /** The pause of every send, or `undefined` when sends are not paused. */
  async sendPause(): Promise<SendPause | undefined> {
    return parseSendPause(await this.redis.hgetall(this.keys.authPause));
  }

  /** Whether a dispatch is queued at the head of its lane, so it may be sent now. */
  async isNext(ref: DispatchRef): Promise<boolean> {
    const reply = await SCRIPTS.isNext.run(
      this.redis,
      [this.keys.dispatch(ref.dispatchId), this.lane(ref)],
      [ref.dispatchId],
    );
    return reply === 1;
  }

  private lane(ref: DispatchRef): string {
    return this.keys.lane(ref.projectId, ref.jobId);
  }
}

/** Reads the pause hash (see `Keys.authPause`); `undefined` when absent or unreadable. */
export function parseSendPause(hash: Record<string, string>): SendPause | undefined {
  const probeAt = Number(hash['probeAt']);
  if (!hash['probeAt'] || !Number.isFinite(probeAt)) return undefined;
  return {
    sinceMs: Number(hash['since'] ?? 0),
    httpStatus: Number(hash['httpStatus'] ?? 0),
    probeAt,
  };
}
