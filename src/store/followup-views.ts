import { readEventEntry } from '../dispatch/event.js';
import { parseRecord, type DispatchRecord } from '../dispatch/record.js';
import type { StoreState } from './store-state.js';

/**
 * What the follow-ups pages read beside `OperatorViews`, each at a cost that does not grow with
 * the backlog: the per-project counts the scripts keep (`Keys.openCounts`), the oldest queued
 * follow-ups (from the tail of BullMQ's wait list), the dead letters, one follow-up with its event,
 * the follow-ups of one agent job; and the link a redrive writes between a dead letter and the
 * follow-up that redrives it. Reached through `DispatchStore.followups`.
 */

/** The open follow-ups of one project, by state. */
export interface OpenCounts {
  queued: number;
  sending: number;
  /** Sent or unsettled: tracked until their agent job ends. */
  tracked: number;
}

/** One queued follow-up, as the page lists it. */
export interface QueuedItem {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly enqueuedAt: number;
}

/** One follow-up that ended undeliverable or timed out and keeps its prompt for a redrive. */
export interface DeadLetter {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly type: string;
  readonly reason: string;
  readonly finishedAt: number;
  /** The follow-up that redrove it, once redriven. */
  readonly redrivenTo: string | undefined;
}

/** One follow-up as its page shows it: its record without the prompt, its event, its links. */
export interface FollowupDetail {
  readonly record: DispatchRecord;
  /** Whether its prompt is still stored (open, or a dead letter within its retention). */
  readonly promptKept: boolean;
  readonly redriveOf: string | undefined;
  readonly redrivenTo: string | undefined;
  /** Its completion event's stream fields, once it ended (and while the stream keeps it). */
  readonly event: Readonly<Record<string, string>> | undefined;
  readonly eventId: string | undefined;
}

const CLASS = { q: 'queued', s: 'sending', t: 'tracked' } as const;

/** The follow-ups pages' reads of one store. */
export class FollowupViews {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /** Every project with an open follow-up, and its counts: one HGETALL. */
  async openCounts(): Promise<Map<string, OpenCounts>> {
    const flat = await this.#state.redis.hgetall(this.#state.keys.openCounts);
    const counts = new Map<string, OpenCounts>();
    for (const [field, value] of Object.entries(flat)) {
      const state = CLASS[field.slice(0, 1) as keyof typeof CLASS] as keyof OpenCounts | undefined;
      const projectId = field.slice(2);
      if (!state || field[1] !== ':' || !projectId) continue;
      const c = counts.get(projectId) ?? { queued: 0, sending: 0, tracked: 0 };
      c[state] = Math.max(0, Number(value) || 0);
      counts.set(projectId, c);
    }
    return counts;
  }

  /**
   * Up to `count` queued follow-ups, oldest first, of those at the far end of BullMQ's wait list
   * and the first due of its delayed set (a follow-up waiting for a budget slot).
   */
  async oldestQueued(count: number): Promise<QueuedItem[]> {
    const { redis, keys } = this.#state;
    const [waiting, delayed] = await Promise.all([
      redis.lrange(keys.dispatchQueue('wait'), -count, -1),
      redis.zrange(keys.dispatchQueue('delayed'), 0, count - 1),
    ]);
    const ids = [...new Set([...waiting.reverse(), ...delayed])];
    const rows = await this.#fields(ids, ['projectId', 'jobId', 'state', 'enqueuedAt']);
    return rows
      .filter(([, v]) => v[2] === 'queued' && v[0] && v[1])
      .map(([dispatchId, v]) => ({
        dispatchId,
        projectId: v[0] ?? '',
        jobId: v[1] ?? '',
        enqueuedAt: Number(v[3]),
      }))
      .sort((a, b) => a.enqueuedAt - b.enqueuedAt)
      .slice(0, count);
  }

  /**
   * The newest `count` dead letters (from `offset`), newest first, and how many the index holds.
   * One whose prompt expired (its index entry not trimmed yet) is left out: it cannot be redriven.
   */
  async deadLetters(count: number, offset = 0): Promise<{ items: DeadLetter[]; total: number }> {
    const { redis, keys } = this.#state;
    const [ids, total] = await Promise.all([
      redis.zrevrange(keys.deadLetters, offset, offset + count - 1),
      redis.zcard(keys.deadLetters),
    ]);
    const fields = ['projectId', 'jobId', 'type', 'reason', 'finishedAt', 'redrivenTo'];
    const [rows, kept] = await Promise.all([this.#fields(ids, fields), this.#promptsKept(ids)]);
    const items = rows
      .filter(([, v], i) => v[0] && v[1] && (kept[i] || v[5]))
      .map(([dispatchId, v]) => ({
        dispatchId,
        projectId: v[0] ?? '',
        jobId: v[1] ?? '',
        type: v[2] ?? '',
        reason: v[3] ?? '',
        finishedAt: Number(v[4]),
        redrivenTo: v[5] || undefined,
      }));
    return { items, total };
  }

  /** One follow-up, without its prompt; `undefined` when unknown or expired. */
  async detail(dispatchId: string): Promise<FollowupDetail | undefined> {
    const { redis, keys, options } = this.#state;
    const [hash, promptKept] = await Promise.all([
      redis.hgetall(keys.dispatch(dispatchId)),
      redis.exists(keys.prompt(dispatchId)),
    ]);
    const { prompt: _prompt, ...rest } = hash;
    const record = parseRecord(dispatchId, rest, false);
    if (!record) return undefined;
    const eventId = hash['eventId'] || undefined;
    const entries = eventId ? await redis.xrange(options.eventsStream, eventId, eventId) : [];
    const [entry] = entries;
    return {
      record,
      promptKept: promptKept === 1 || _prompt !== undefined,
      redriveOf: hash['redriveOf'] || undefined,
      redrivenTo: hash['redrivenTo'] || undefined,
      event: entry ? readEventEntry(entry[1]).fields : undefined,
      eventId,
    };
  }

  /** Whether `dispatchId` has a record here: one EXISTS. */
  async has(dispatchId: string): Promise<boolean> {
    return (await this.#state.redis.exists(this.#state.keys.dispatch(dispatchId))) === 1;
  }

  /**
   * The open follow-ups of agent job `jobId` in each of `projectIds` (its lane, head first): one
   * HGET and one LRANGE per project.
   */
  async ofJob(projectIds: readonly string[], jobId: string): Promise<string[]> {
    const { redis, keys } = this.#state;
    if (projectIds.length === 0) return [];
    const pipeline = redis.pipeline();
    for (const p of projectIds) {
      pipeline.hget(keys.laneHeads(p), jobId);
      pipeline.lrange(keys.lane(p, jobId), 0, 99);
    }
    const replies = (await pipeline.exec()) ?? [];
    const ids: string[] = [];
    for (const [err, value] of replies) {
      if (err || value === null) continue;
      ids.push(...(Array.isArray(value) ? (value as string[]) : [value as string]));
    }
    return [...new Set(ids)];
  }

  /**
   * Links dead letter `fromId` to `toId`, the follow-up that redrives it, in one MULTI: the old
   * record names the new one (`redrivenTo`) and leaves the dead letters, its prompt is deleted
   * (the new follow-up has it), and the new record names the old one (`redriveOf`).
   */
  async linkRedrive(fromId: string, toId: string): Promise<void> {
    const { redis, keys } = this.#state;
    const replies = await redis
      .multi()
      .hset(keys.dispatch(fromId), 'redrivenTo', toId)
      .zrem(keys.deadLetters, fromId)
      .del(keys.prompt(fromId))
      .hset(keys.dispatch(toId), 'redriveOf', fromId)
      .exec();
    const failed = (replies ?? []).find(([err]) => err)?.[0];
    if (failed) throw failed;
  }

  /** Whether each one's prompt is still stored, in one pipeline. */
  async #promptsKept(ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const pipeline = this.#state.redis.pipeline();
    for (const id of ids) pipeline.exists(this.#state.keys.prompt(id));
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((_, i) => replies[i]?.[1] === 1);
  }

  /** Fields of each record, by id, in one pipeline; a record that is not a hash reads as empty. */
  async #fields(ids: readonly string[], fields: readonly string[]) {
    if (ids.length === 0) return [];
    const { redis, keys } = this.#state;
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hmget(keys.dispatch(id), ...fields);
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((id, i): [string, (string | null)[]] => {
      const [err, values] = replies[i] ?? [null, []];
      return [id, err ? [] : ((values ?? []) as (string | null)[])];
    });
  }
}
