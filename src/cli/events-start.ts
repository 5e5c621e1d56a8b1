import type { Redis } from 'ioredis';
import { readEventEntry } from '../dispatch/event.js';
import { idBefore } from '../store/event-gaps.js';
import {
  CursorError,
  newestCursor,
  parseCursor,
  startCursor,
  type Cursor,
  type EventFilter,
} from '../store/event-pages.js';
import { compareIds } from '../store/event-reader.js';
import { UsageError } from './command.js';

/**
 * Where `events` starts reading. `--from` a cursor, or `start`; `--follow` alone: from now on;
 * `--limit N` alone: just before the newest N events the filter
 * keeps, across every shard's stream, so that reading forward from it prints the last N, oldest
 * first, and the last printed cursor resumes after them as any page's does. Pages read the
 * streams merged by id, then shard; this walks that order backwards (id, then shard, descending),
 * putting each shard's position just below the oldest of its entries taken.
 */

/** What `--from` names for the oldest event kept. */
const FROM_START = new Set(['start', '0']);

/**
 * `--from` as a cursor of `shards` shards, or `'start'`; a {@link UsageError} naming the flag when
 * it is neither.
 */
export function fromCursor(text: string | undefined, shards: number): Cursor | 'start' | undefined {
  if (text === undefined) return undefined;
  if (FROM_START.has(text)) return 'start';
  try {
    return parseCursor(text, shards);
  } catch (err) {
    if (err instanceof CursorError) throw new UsageError(`--from: ${err.message}`);
    throw err;
  }
}

/** What the start depends on: `events`'s options. */
export interface StartOptions {
  readonly from: string | undefined;
  readonly follow: boolean;
  /** `Infinity`: no limit. */
  readonly limit: number;
  readonly filter: EventFilter;
}

/**
 * The cursor `events` reads after, and whether its first page starts at the oldest kept (no gap
 * to check there, nor before a tail found just now).
 */
export async function startOf(
  redis: Redis,
  streams: readonly string[],
  { from: text, follow, limit, filter }: StartOptions,
): Promise<{ cursor: Cursor; fromStart: boolean }> {
  const from = fromCursor(text, streams.length);
  if (from === 'start') return { cursor: startCursor(streams.length), fromStart: true };
  if (from) return { cursor: from, fromStart: false };
  // Following from now on starts after the newest entry of each stream: XREAD's `$` would skip
  // what arrives between two reads.
  if (follow) return { cursor: await newestCursor(redis, streams), fromStart: false };
  // The newest N, as `git log -n` and `kubectl logs --tail` show them.
  const tail = Number.isFinite(limit) ? await tailCursor(redis, streams, limit, filter) : undefined;
  return { cursor: tail ?? startCursor(streams.length), fromStart: true };
}

/** Entries read from one stream per XREVRANGE. */
const FETCH = 500;

type Entry = [id: string, fields: string[]];

/**
 * The cursor before the newest `count` events `filter` keeps; `undefined` when the streams hold
 * no more than that many, so the read starts at the oldest kept.
 */
export async function tailCursor(
  redis: Redis,
  streams: readonly string[],
  count: number,
  filter: EventFilter,
): Promise<Cursor | undefined> {
  const reads = streams.map((stream) => new ReverseRead(redis, stream));
  await Promise.all(reads.map((r) => r.fill()));
  // A shard none of whose entries is taken stays after its newest: nothing of it is printed.
  const cursor = reads.map((r) => r.head()?.[0] ?? '0-0');
  for (let kept = 0; kept < count;) {
    await Promise.all(reads.map((r) => r.fill()));
    const shard = latest(reads);
    const entry = shard === undefined ? undefined : reads[shard]?.take();
    if (shard === undefined || !entry) return undefined;
    cursor[shard] = idBefore(entry[0]);
    if (keeps(filter, entry[1])) kept++;
  }
  return cursor;
}

/** The shard whose next entry back comes last in the merged order (highest id, then shard). */
function latest(reads: readonly ReverseRead[]): number | undefined {
  let best: number | undefined;
  reads.forEach((read, i) => {
    const head = read.head();
    const bestHead = best === undefined ? undefined : reads[best]?.head();
    if (head && (!bestHead || compareIds(head[0], bestHead[0]) >= 0)) best = i;
  });
  return best;
}

function keeps(filter: EventFilter, flat: readonly string[]): boolean {
  const { type, projectId } = readEventEntry(flat);
  if (filter.types.size > 0 && !filter.types.has(type)) return false;
  return filter.projects.size === 0 || filter.projects.has(projectId);
}

/** One stream read from its newest entry back, a fetch at a time. */
class ReverseRead {
  #buffer: Entry[] = [];
  #taken = 0;
  #ended = false;
  /** The oldest id fetched so far: the next fetch reads below it. */
  #fetchedTo: string | undefined;
  constructor(
    private readonly redis: Redis,
    private readonly stream: string,
  ) {}

  async fill(): Promise<void> {
    if (this.#ended || this.#taken < this.#buffer.length) return;
    const end = this.#fetchedTo === undefined ? '+' : `(${this.#fetchedTo}`;
    this.#buffer = (await this.redis.xrevrange(this.stream, end, '-', 'COUNT', FETCH)) as Entry[];
    this.#taken = 0;
    const last = this.#buffer.at(-1);
    if (last) this.#fetchedTo = last[0];
    this.#ended = this.#buffer.length < FETCH;
  }

  head(): Entry | undefined {
    return this.#buffer[this.#taken];
  }

  take(): Entry | undefined {
    return this.#buffer[this.#taken++];
  }
}
