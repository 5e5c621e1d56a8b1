import { readEventEntry } from '../dispatch/event.js';
import { parseRecord } from '../dispatch/record.js';
import type { StoreState } from './store-state.js';
import type {
  DeadLetter,
  DeadLetterCursor,
  FollowupDetail,
  OpenCounts,
  QueuedItem,
} from './followup-types.js';

export type {
  DeadLetter,
  DeadLetterCursor,
  FollowupDetail,
  OpenCounts,
  QueuedItem,
} from './followup-types.js';

/**
 * What the follow-ups pages read beside `OperatorViews`, each at a cost that does not grow with
 * the backlog: the per-project counts the scripts keep (`Keys.openCounts`), the oldest queued
 * follow-ups (from the tail of BullMQ's wait list), the dead letters, one follow-up with its event,
 * the follow-ups of one agent job; and the link a redrive writes between a dead letter and the
 * follow-up that redrives it. Reached through `DispatchStore.followups`.
 */

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
    return { items: await this.#deadLettersOf(ids), total };
  }

  /**
   * Up to `count` dead letters that ended at or after `fromMs`, oldest first, from after `after`
   * (the `next` of the page before), read by end time so that the ones a redrive takes out of the
   * index meanwhile move nothing (ends of one millisecond in the index's order, by id); `next`
   * undefined: the index has no more. Each one's `finishedAt` is its index entry's, the order read.
   */
  async deadLettersFrom(fromMs: number, after: DeadLetterCursor | undefined, count: number) {
    const { redis, keys } = this.#state;
    const from = after?.finishedAt ?? fromMs;
    for (let offset = 0; ; offset += count) {
      const flat = await redis.zrange(
        keys.deadLetters,
        from,
        '+inf',
        'BYSCORE',
        'LIMIT',
        offset,
        count,
        'WITHSCORES',
      );
      const page: DeadLetterCursor[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const at = { dispatchId: flat[i] as string, finishedAt: Number(flat[i + 1]) };
        if (!after || at.finishedAt > after.finishedAt || at.dispatchId > after.dispatchId)
          page.push(at);
      }
      const full = flat.length === 2 * count;
      // A page of ends all in the millisecond already passed: the next page of it.
      if (page.length === 0 && full) continue;
      const ends = new Map(page.map((c) => [c.dispatchId, c.finishedAt]));
      const items = (await this.#deadLettersOf([...ends.keys()])).map((d) => ({
        ...d,
        finishedAt: ends.get(d.dispatchId) ?? d.finishedAt,
      }));
      return { items, next: full ? page.at(-1) : undefined };
    }
  }

  /** The dead letters `ids` with a record and a prompt still kept (or redriven), in that order. */
  async #deadLettersOf(ids: readonly string[]): Promise<DeadLetter[]> {
    const fields = ['projectId', 'jobId', 'type', 'reason', 'finishedAt', 'redrivenTo'];
    const [rows, kept] = await Promise.all([this.#fields(ids, fields), this.#promptsKept(ids)]);
    return rows
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
   * Links dead letter `fromId` to `toId`, the follow-up that redrives it, in one script
   * (linkRedrive-4.lua): the old record names the new one (`redrivenTo`) and leaves the dead
   * letters, its prompt is deleted (the new follow-up has it), and the new record names the old
   * one (`redriveOf`); a record that expired meanwhile is not written (it would come back
   * without its TTL).
   */
  async linkRedrive(fromId: string, toId: string): Promise<void> {
    const { keys, scripts } = this.#state;
    await scripts.run(
      'linkRedrive',
      [keys.dispatch(fromId), keys.deadLetters, keys.prompt(fromId), keys.dispatch(toId)],
      [fromId, toId],
    );
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
