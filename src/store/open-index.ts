import type { DispatchState } from '../dispatch/record.js';
import type { StoreState } from './store-state.js';

/**
 * The store's walk of the open dispatches (not finished yet): the repair sweep walks them page by
 * page, `project show` and the dashboard count them, and a change of shard count waits until
 * there are none. Reached as `DispatchStore.open`.
 *
 * An open dispatch is in one of two places, so that the most common one costs no index entry:
 * - a lane of one (see `includes/lane.lua`) is its project's lane heads field, and the
 *   project is named in the lane projects set (`Keys.laneProjects`);
 * - a follow-up in a lane of two or more is in the open index (`Keys.open`), by enqueue time.
 *
 * A walk reads the open index first, oldest first, then the lanes of one, project by project.
 */

/** What the repair sweep needs to know of one open dispatch; `state` undefined = no record. */
export interface OpenDispatch {
  readonly dispatchId: string;
  /** Its enqueue time; 0 when a lane of one has no record left to say it. */
  readonly enqueuedAt: number;
  readonly state: DispatchState | undefined;
  readonly projectId: string;
  readonly jobId: string;
  /** The BullMQ job that carries it: the dispatch id, unless a resend or a repair replaced it. */
  readonly bullJobId: string;
  readonly resendPending: boolean;
  /** How many times a repair replaced its BullMQ job. */
  readonly repairs: number;
  /** Its trace context, for the BullMQ job a repair adds. */
  readonly traceparent: string | undefined;
  /** Found as a lane of one (its project's lane heads field), not in the open index. */
  readonly laneOfOne: boolean;
}

/** One page of a walk. */
export interface OpenPage {
  readonly dispatches: OpenDispatch[];
  /**
   * Where the walk goes on once `dropped` of this page's dispatches were dropped (`drop` shifts
   * the open index's ranks after them down), or `undefined` when the walk is over.
   */
  next(dropped: number): string | undefined;
}

/** The cursor of a walk's start. */
export const OPEN_WALK_START = '0';

/**
 * A cursor is the rank in the open index where the walk goes on, or, once the walk reached the
 * lanes of one, `lanes:<HSCAN cursor>:<project>`, where the project is as named in the lane
 * projects set ('' = the first).
 */
const LANES = 'lanes:';

function lanesCursor(cursor: string): { project: string; hscan: string } | undefined {
  if (!cursor.startsWith(LANES)) return undefined;
  const rest = cursor.slice(LANES.length);
  const colon = rest.indexOf(':');
  return { hscan: rest.slice(0, colon), project: rest.slice(colon + 1) };
}

/** The fields of a record the walk reads (never the prompt). */
const FIELDS = [
  'state',
  'projectId',
  'jobId',
  'bullJobId',
  'resend',
  'repairs',
  'traceparent',
  'enqueuedAt',
] as const;

/** An entry found by the walk, before its record is read. */
interface Found {
  readonly id: string;
  /** Its score in the open index; `undefined` for a lane of one (its record says). */
  readonly at?: number;
  /** A lane of one's project and agent job, as its lane heads say. */
  readonly lane?: { readonly projectId: string; readonly jobId: string };
}

/** The open dispatches of one store: `DispatchStore.open`. */
export class OpenIndex {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /**
   * Reads about `count` open dispatches from `cursor` ({@link OPEN_WALK_START} to begin), each
   * enqueued by `enqueuedBy` (a younger one is left out), without their prompts.
   */
  async page(cursor: string, count: number, enqueuedBy: number): Promise<OpenPage> {
    const lanes = lanesCursor(cursor);
    if (lanes) return this.#lanesPage(lanes, count, enqueuedBy);
    const { redis, keys } = this.#state;
    const rank = Number(cursor) || 0;
    const flat = await redis.zrange(keys.open, rank, rank + count - 1, 'WITHSCORES');
    const found: Found[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const at = Number(flat[i + 1]);
      // The index is in enqueue order: what follows is younger still.
      if (at > enqueuedBy) break;
      found.push({ id: flat[i] as string, at });
    }
    const full = found.length === count;
    return {
      dispatches: await this.#read(found),
      next: (dropped) => (full ? String(rank + count - dropped) : `${LANES}0:`),
    };
  }

  /**
   * Reads about `max` open dispatches at most, from the walk's start (the oldest in the open
   * index first), each once; `complete` when that was all of them.
   */
  async first(max: number): Promise<{ dispatches: OpenDispatch[]; complete: boolean }> {
    const read = new Map<string, OpenDispatch>();
    let cursor: string | undefined = OPEN_WALK_START;
    while (cursor !== undefined && read.size < max) {
      const page = await this.page(cursor, max - read.size, Number.MAX_SAFE_INTEGER);
      for (const d of page.dispatches) read.set(d.dispatchId, d);
      cursor = page.next(0);
    }
    return { dispatches: [...read.values()], complete: cursor === undefined };
  }

  async #lanesPage(
    from: { project: string; hscan: string },
    count: number,
    enqueuedBy: number,
  ): Promise<OpenPage> {
    const { keys, scripts } = this.#state;
    const [project, hscan, flat] = (await scripts.run(
      'openLanes',
      [keys.laneProjects],
      [keys.laneHeadsPrefix, from.project, from.hscan, count, enqueuedBy, keys.dispatch('')],
    )) as [string, string, string[]];
    const found: Found[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const name = flat[i] as string;
      const projectId = name.slice(name.indexOf('.') + 1);
      found.push({ id: flat[i + 2] as string, lane: { projectId, jobId: flat[i + 1] as string } });
    }
    // The script passed over the young ones; one registered again meanwhile is left out here.
    const dispatches = (await this.#read(found)).filter((d) => d.enqueuedAt <= enqueuedBy);
    return {
      dispatches,
      next: () => (project === '' ? undefined : `${LANES}${hscan}:${project}`),
    };
  }

  /**
   * Reads the records of what the walk found, in one pipeline. A record that is not a hash (a hand
   * edit) says nothing the walk can act on: it is left out, where it is, and the rest is read (the
   * worker's ACQUIRE reports it as a store item error).
   */
  async #read(found: readonly Found[]): Promise<OpenDispatch[]> {
    const { redis, keys } = this.#state;
    if (found.length === 0) return [];
    const pipeline = redis.pipeline();
    for (const { id } of found) pipeline.hmget(keys.dispatch(id), ...FIELDS);
    const replies = (await pipeline.exec()) ?? [];
    return found.flatMap(({ id, at, lane }, i): OpenDispatch[] => {
      const [err, values] = replies[i] ?? [new Error('no reply'), []];
      if (err?.message.startsWith('WRONGTYPE')) return [];
      if (err) throw err;
      const [state, projectId, jobId, bullJobId, resend, repairs, traceparent, enqueuedAt] =
        values as (string | null)[];
      return [
        {
          dispatchId: id,
          enqueuedAt: at ?? Number(enqueuedAt ?? 0),
          state: (state ?? undefined) as DispatchState | undefined,
          projectId: projectId ?? lane?.projectId ?? '',
          jobId: jobId ?? lane?.jobId ?? '',
          bullJobId: bullJobId || id,
          resendPending: resend === '1',
          repairs: Number(repairs ?? 0),
          traceparent: traceparent || undefined,
          laneOfOne: lane !== undefined,
        },
      ];
    });
  }

  /**
   * Takes dispatches out of the walk (their record is gone or already done), and their prompts: a
   * record deleted by hand leaves its prompt's key behind. A lane of one leaves its lane heads if
   * it still heads its lane.
   */
  async drop(dispatches: readonly OpenDispatch[]): Promise<void> {
    const { redis, keys, scripts } = this.#state;
    if (dispatches.length === 0) return;
    const ids = dispatches.map((d) => d.dispatchId);
    const multi = redis
      .multi()
      .zrem(keys.open, ...ids)
      .del(...ids.map((id) => keys.prompt(id)));
    for (const d of dispatches) {
      if (d.laneOfOne)
        scripts.queue(multi, 'dropHead', [keys.laneHeads(d.projectId)], [d.jobId, d.dispatchId]);
    }
    const replies = await multi.exec();
    const failed = replies?.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }

  /** How many dispatches are not finished yet: a change of shard count waits for 0. */
  async count(): Promise<number> {
    const { redis, keys } = this.#state;
    let total = await redis.zcard(keys.open);
    const PAGE = 1_000;
    // By name, not by rank: a walk may drop a project meanwhile, which would shift the ranks.
    for (let after = '-'; ;) {
      const names = await redis.zrange(keys.laneProjects, after, '+', 'BYLEX', 'LIMIT', 0, PAGE);
      if (names.length === 0) return total;
      after = `(${names.at(-1) as string}`;
      const pipeline = redis.pipeline();
      for (const name of names) pipeline.hlen(keys.laneHeadsPrefix + name);
      for (const [err, n] of (await pipeline.exec()) ?? []) {
        if (err) throw err;
        total += Number(n);
      }
    }
  }
}
