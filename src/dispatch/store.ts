import type { ChainableCommander, Redis } from 'ioredis';
import type { AgentJob } from '../agent-api/index.js';
import type { Rate } from '../config/index.js';
import type { Keys } from '../redis/keys.js';
import { contentDigest, type FollowUp } from './followup.js';
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
  /**
   * Another attempt (`attemptToken`) recorded its intent at `sendingAt` and has not recorded an
   * outcome.
   */
  | { kind: 'sending'; sendingAt: number; attemptToken: string }
  | { kind: 'not-queued'; state: DispatchState };

/** What the repair sweep needs to know of one open dispatch; `state` undefined = no record. */
export interface OpenDispatch {
  readonly dispatchId: string;
  readonly enqueuedAt: number;
  readonly state: DispatchState | undefined;
  readonly projectId: string;
  readonly jobId: string;
  /** The BullMQ job that carries it: the dispatch id, unless a resend or a repair replaced it. */
  readonly bullJobId: string;
  readonly resendPending: boolean;
  /** How many times a repair replaced its BullMQ job. */
  readonly repairs: number;
}
/**
 * What recording an attempt's outcome did: `marked` (or it already was), `moved-on` (the record is
 * in another state), `stale` (another attempt holds the intent now).
 */
export type MarkResult = 'marked' | 'moved-on' | 'stale';

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

  /**
   * Queues the registration of a follow-up on `multi` (the producer's transaction). Its reply: 1
   * registered, 0 the same content was registered under this id before, -1 different content was.
   */
  registerInto(multi: ChainableCommander, dispatchId: string, followUp: FollowUp): void {
    const keys = [
      this.keys.dispatch(dispatchId),
      this.keys.lane(followUp.projectId, followUp.jobId),
      this.keys.open,
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
      contentDigest(followUp),
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
   * may still be spent (see the ACQUIRE script). `attemptToken` names this attempt: asked again
   * with it while the intent stands, the answer is `go` again, with nothing spent twice.
   */
  async acquire(
    ref: DispatchRef,
    rate: Rate,
    toleranceMs: number,
    firstPollMs: number,
    attemptToken: string,
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
      [
        ref.dispatchId,
        rate.max,
        rate.windowMs,
        toleranceMs,
        Math.max(1, Math.round(firstPollMs)),
        attemptToken,
      ],
    )) as [string, number, string, number?];
    const [kind, n, text, probe] = reply;
    switch (kind) {
      case 'go':
        return { kind, attempt: n, prompt: text, probe: probe === 1 };
      case 'blocked':
      case 'missing':
        return { kind };
      case 'auth_paused':
        return { kind, untilMs: n };
      case 'parked':
      case 'over':
        return { kind, untilMs: n };
      case 'sending':
        return { kind, sendingAt: n, attemptToken: text };
      default:
        return { kind: 'not-queued', state: kind as DispatchState };
    }
  }

  /**
   * Records the send of attempt `attemptToken` as done (`sent`) or of unknown outcome
   * (`unsettled`) and starts tracking it. Idempotent: safe to retry after a connection error.
   */
  async markSent(
    ref: DispatchRef,
    state: 'sent' | 'unsettled',
    job: AgentJob | undefined,
    firstDelayMs: number,
    attemptToken: string,
  ): Promise<MarkResult> {
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
        attemptToken,
      ],
    );
    return reply === 1 ? 'marked' : reply === 0 ? 'moved-on' : 'stale';
  }

  /**
   * Returns a dispatch to `queued`, for attempt `attemptToken` only. `refund` when the request
   * never left, `parkMs` to park the project. Resolves to the park deadline (0 if none), or why
   * nothing changed.
   */
  async requeue(
    ref: DispatchRef,
    attempt: number,
    attemptToken: string,
    refund: boolean,
    parkMs = 0,
  ): Promise<number | Exclude<MarkResult, 'marked'>> {
    const reply = (await SCRIPTS.requeue.run(
      this.redis,
      [
        this.keys.dispatch(ref.dispatchId),
        this.keys.budget(ref.projectId),
        this.keys.park(ref.projectId),
        this.keys.tracked,
      ],
      [ref.dispatchId, attempt, refund ? '1' : '0', Math.max(0, Math.round(parkMs)), attemptToken],
    )) as number;
    if (reply === -1) return 'moved-on';
    return reply === -2 ? 'stale' : reply;
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
    const job = ending.job ?? record.job;
    const reply = (await SCRIPTS.finish.run(
      this.redis,
      [
        this.keys.dispatch(record.dispatchId),
        this.lane(record),
        this.keys.tracked,
        this.options.eventsStream,
        this.keys.open,
      ],
      [
        record.dispatchId,
        expected ?? '',
        finishedAt,
        ending.type,
        ending.reason ?? '',
        this.options.retentionMs,
        this.options.eventsMaxLen,
        ending.job ? JSON.stringify(ending.job) : '',
        job?.status ?? '',
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

  /**
   * Reads up to `count` open dispatches (not finished), oldest first from `rank`, enqueued no
   * later than `enqueuedBy`: one ZRANGE and one pipeline of HMGETs (never the prompt). Also says
   * whether the index holds more past this page.
   */
  async openPage(
    rank: number,
    count: number,
    enqueuedBy: number,
  ): Promise<{ dispatches: OpenDispatch[]; more: boolean }> {
    const flat = await this.redis.zrange(this.keys.open, rank, rank + count - 1, 'WITHSCORES');
    const page: { id: string; at: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const at = Number(flat[i + 1]);
      if (at > enqueuedBy) break;
      page.push({ id: flat[i] as string, at });
    }
    const more = page.length === count;
    if (page.length === 0) return { dispatches: [], more };
    const fields = ['state', 'projectId', 'jobId', 'bullJobId', 'resend', 'repairs'] as const;
    const pipeline = this.redis.pipeline();
    for (const { id } of page) pipeline.hmget(this.keys.dispatch(id), ...fields);
    const replies = (await pipeline.exec()) ?? [];
    const dispatches = page.map(({ id, at }, i): OpenDispatch => {
      const [err, values] = replies[i] ?? [new Error('no reply'), []];
      if (err) throw err;
      const [state, projectId, jobId, bullJobId, resend, repairs] = values as (string | null)[];
      return {
        dispatchId: id,
        enqueuedAt: at,
        state: (state ?? undefined) as DispatchState | undefined,
        projectId: projectId ?? '',
        jobId: jobId ?? '',
        bullJobId: bullJobId || id,
        resendPending: resend === '1',
        repairs: Number(repairs ?? 0),
      };
    });
    return { dispatches, more };
  }

  /** Removes dispatches from the open index (their record is gone or already done). */
  async dropOpen(ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.redis.zrem(this.keys.open, ...ids);
  }

  /**
   * Records that `bullJobId` now carries a queued dispatch, if its record still names `expected`
   * (see the CARRY script; '' = whichever). Resolves to whether it was recorded.
   */
  async carry(dispatchId: string, expected: string, bullJobId: string): Promise<boolean> {
    const reply = await SCRIPTS.carry.run(
      this.redis,
      [this.keys.dispatch(dispatchId)],
      [dispatchId, expected, bullJobId],
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
