import type { Redis } from 'ioredis';
import { checkGap, noSuchKey, streamBounds } from './event-gaps.js';
import { compareIds } from './event-reader.js';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * Pages of completion events across every shard's stream, in one order, with a cursor that
 * loses nothing. Each shard publishes to a stream of its own (a script writes its own slot only),
 * possibly on another node with another clock, so one position (an id, even with the shard as a
 * tiebreak) cannot be exact: a shard may append, after a page was read, an entry whose id sorts
 * before that page's last one. The cursor is therefore the last id read in *each* shard's stream:
 * a stream only ever appends ids above its own last one, so "after the cursor" is exact per
 * stream, and a page merges the streams by id (then shard) without reading past what one shard
 * has not fetched yet.
 */

/** A position in every shard's stream: the id of the last entry read in each, by shard index. */
export type Cursor = readonly string[];

/** A cursor that does not fit the deployment: malformed, or written for another shard count. */
export class CursorError extends AgentDispatchError {
  readonly code = 'invalid_cursor';
  constructor(message: string) {
    super(message);
    this.name = 'CursorError';
  }
}

/** Separates the shards' ids in a cursor's text; URL-safe, and no stream id contains it. */
const SEPARATOR = '_';
const STREAM_ID = /^\d{1,20}(-\d{1,20})?$/;

/** The cursor before every entry of `shards` streams. */
export function startCursor(shards: number): Cursor {
  return Array.from({ length: shards }, () => '0-0');
}

/**
 * The text of a cursor: the shards' ids joined by `_`. With one shard it is the stream id itself,
 * so `--from` keeps taking the ids it always took.
 */
export function formatCursor(cursor: Cursor): string {
  return cursor.join(SEPARATOR);
}

/** Reads a cursor's text for a deployment of `shards` shards; throws {@link CursorError}. */
export function parseCursor(text: string, shards: number): Cursor {
  const ids = text.split(SEPARATOR);
  if (!ids.every((id) => STREAM_ID.test(id))) {
    throw new CursorError(
      `expected a cursor (a printed "cursor", such as 1732312345678-0), got "${text.slice(0, 80)}"`,
    );
  }
  if (ids.length !== shards) {
    throw new CursorError(
      `the cursor names ${ids.length} shard(s), but the deployment has ${shards} (DISPATCH_SHARDS): ` +
        `pass a cursor printed with this layout`,
    );
  }
  // `ms` alone is `ms-0`, as Redis reads it, so the cursor holds full ids only.
  const full = ids.map((id) => (id.includes('-') ? id : `${id}-0`));
  // Redis refuses a part above 64 bits, and nothing comes after the largest id: a page read
  // from either would fail at Redis, which is the cursor's fault, not Redis's.
  if (full.some((id) => id.split('-').some((part) => BigInt(part) > U64_MAX) || id === LAST_ID))
    throw new CursorError(`"${text.slice(0, 80)}" is past the largest stream id`);
  return full;
}

const U64_MAX = 2n ** 64n - 1n;
/** The largest stream id: XRANGE refuses to start after it. */
const LAST_ID = `${U64_MAX}-${U64_MAX}`;

/** What a page keeps: event types and projects; an empty set keeps every one. */
export interface EventFilter {
  readonly types: ReadonlySet<string>;
  readonly projects: ReadonlySet<string>;
}

/** The filter that keeps everything. */
export const EVERY_EVENT: EventFilter = { types: new Set(), projects: new Set() };

/** One entry of a page: where it came from, its flat fields, and the cursor just after it. */
export interface PagedEntry {
  readonly shard: number;
  readonly id: string;
  readonly fields: readonly string[];
  /** The cursor that resumes after this entry (text form). */
  readonly cursor: string;
}

/** A page: its entries, the cursor after the last entry looked at, and whether it read to the end. */
export interface EventPage {
  readonly entries: PagedEntry[];
  readonly next: Cursor;
  /** Every stream was read to its end: a next page now would be empty. */
  readonly caughtUp: boolean;
}

/** Options of {@link readEventPage}. */
export interface PageOptions {
  /** Most entries the page holds. */
  readonly limit: number;
  readonly filter?: EventFilter;
  /**
   * Most entries looked at, kept or not: bounds one page's work when the filter keeps few.
   * @defaultValue 10000
   */
  readonly scanMax?: number;
  /** Most entries one XRANGE reads from a stream. @defaultValue 500, or `limit` when unfiltered */
  readonly fetchMax?: number;
  /** `after` is the {@link startCursor}: the oldest entries kept, so a trimmed head is no gap. */
  readonly fromStart?: boolean;
}

/** Entries read from one stream per XRANGE. */
const FETCH = 500;

type Entry = [id: string, fields: string[]];

/**
 * The entries after `after` in `streams` (by shard index), merged by id, then by shard. Throws
 * `CursorGapError` when a stream was trimmed past `after`, or `after` is ahead of it.
 */
export async function readEventPage(
  redis: Redis,
  streams: readonly string[],
  after: Cursor,
  { limit, filter = EVERY_EVENT, scanMax = 10_000, fetchMax = FETCH, fromStart }: PageOptions,
): Promise<EventPage> {
  const filtering = filter.types.size > 0 || filter.projects.size > 0;
  const reads = streams.map((stream, i) => new StreamRead(redis, stream, i, after[i] ?? '0-0'));
  if (fromStart) for (const read of reads) read.checked = true;
  const fetch = filtering ? fetchMax : Math.max(1, Math.min(fetchMax, limit));
  const next = [...after];
  const entries: PagedEntry[] = [];
  for (let looked = 0; entries.length < limit && looked < scanMax; looked++) {
    await Promise.all(reads.map((r) => r.fill(fetch)));
    const shard = earliest(reads);
    const entry = shard === undefined ? undefined : reads[shard]?.take();
    if (shard === undefined || !entry) return { entries, next, caughtUp: true };
    next[shard] = entry[0];
    if (keeps(filter, entry[1]))
      entries.push({ shard, id: entry[0], fields: entry[1], cursor: formatCursor(next) });
  }
  return { entries, next, caughtUp: false };
}

/** The shard whose next entry comes first (lowest id, then lowest shard), or none left. */
function earliest(reads: readonly StreamRead[]): number | undefined {
  let best: number | undefined;
  reads.forEach((read, i) => {
    const head = read.head();
    const bestHead = best === undefined ? undefined : reads[best]?.head();
    if (head && (!bestHead || compareIds(head[0], bestHead[0]) < 0)) best = i;
  });
  return best;
}

/** Whether `filter` keeps the entry with these flat fields. */
function keeps(filter: EventFilter, flat: readonly string[]): boolean {
  const field = (name: string) => {
    for (let i = 0; i + 1 < flat.length; i += 2) if (flat[i] === name) return flat[i + 1] ?? '';
    return '';
  };
  if (filter.types.size > 0 && !filter.types.has(field('type'))) return false;
  return filter.projects.size === 0 || filter.projects.has(field('projectId'));
}

/**
 * One stream's part of a page: what was fetched and not taken yet. A stream whose buffer is empty
 * is fetched again before any merge decision, unless its last fetch found its end: only then is
 * no entry of it still to come before the heads of the others.
 */
class StreamRead {
  #buffer: Entry[] = [];
  #taken = 0;
  #ended = false;
  /** Whether the cursor was checked for a gap (or needs none). */
  checked = false;
  constructor(
    private readonly redis: Redis,
    private readonly stream: string,
    private readonly shard: number,
    private fetchedTo: string,
  ) {}

  async fill(count: number): Promise<void> {
    if (this.#ended || this.#taken < this.#buffer.length) return;
    const range = ['(' + this.fetchedTo, '+', 'COUNT', count] as const;
    this.#buffer = this.checked
      ? ((await this.redis.xrange(this.stream, ...range)) as Entry[])
      : await this.checkedRange(range);
    this.#taken = 0;
    const last = this.#buffer.at(-1);
    if (last) this.fetchedTo = last[0];
    this.#ended = this.#buffer.length < count;
  }

  /**
   * The first read, in one transaction with the stream's bounds: a trim between a separate check
   * and the read would drop entries after the cursor unseen. Throws {@link CursorGapError}.
   */
  private async checkedRange(range: readonly [string, '+', 'COUNT', number]): Promise<Entry[]> {
    const replies = await this.redis
      .multi()
      .xinfo('STREAM', this.stream)
      .xrange(this.stream, ...range)
      .exec();
    const [[infoErr, info] = [null, undefined], [rangeErr, entries] = [null, []]] = replies ?? [];
    if (rangeErr) throw rangeErr;
    if (infoErr) noSuchKey(infoErr);
    checkGap(this.shard, this.fetchedTo, streamBounds(info));
    this.checked = true;
    return entries as Entry[];
  }

  head(): Entry | undefined {
    return this.#buffer[this.#taken];
  }

  take(): Entry | undefined {
    return this.#buffer[this.#taken++];
  }
}

/** The cursor at the newest entry of every stream (`0-0` for an empty one): "from now on". */
export async function newestCursor(redis: Redis, streams: readonly string[]): Promise<Cursor> {
  return Promise.all(
    streams.map(async (s) => (await redis.xrevrange(s, '+', '-', 'COUNT', 1))[0]?.[0] ?? '0-0'),
  );
}

/** Whether any stream holds an entry after `cursor` (one cheap XREAD COUNT 1 per stream). */
export async function hasNewer(
  redis: Redis,
  streams: readonly string[],
  cursor: Cursor,
): Promise<boolean> {
  const replies = await Promise.all(
    streams.map((s, i) => redis.xread('COUNT', 1, 'STREAMS', s, cursor[i] ?? '0-0')),
  );
  return replies.some((reply) => (reply?.[0]?.[1].length ?? 0) > 0);
}
