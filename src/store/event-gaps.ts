import type { Redis } from 'ioredis';
import { compareIds } from './event-reader.js';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * Where a cursor cannot resume exactly, said rather than passed over. A stream keeps at most
 * `EVENTS_MAXLEN` entries: a reader left behind by more finds its next entries trimmed, and
 * reading on from the oldest kept would skip them without a word. A cursor ahead of everything a
 * stream ever wrote was not read from it (another deployment, a Redis restored from an older
 * copy): reading after it would skip every event until the clock passes it. `XINFO STREAM` tells
 * both: `last-generated-id` is the largest id ever written; `entries-added` above `length` means
 * entries were removed, and trimming removes the oldest, so a cursor below the first entry kept
 * stood among them. (Trimming leaves `max-deleted-entry-id` as it was, so that field cannot tell.)
 * A cursor at the very last entry trimmed lost nothing but is refused too: the stream cannot tell
 * it from one that lost entries, and such a reader is `EVENTS_MAXLEN` behind anyway.
 */

/** What `XINFO STREAM` says of one stream; all `0-0` for a stream that does not exist. */
export interface StreamBounds {
  readonly lastGenerated: string;
  /** The oldest entry kept, if any. */
  readonly first: string | undefined;
  /** Entries were removed (`entries-added` > `length`); never known before Redis 7. */
  readonly trimmed: boolean;
}

/** A cursor that cannot resume exactly: trimmed past, or ahead of its stream, in shard `shard`. */
export class CursorGapError extends AgentDispatchError {
  readonly code: 'events_trimmed' | 'cursor_ahead';
  constructor(
    readonly shard: number,
    readonly kind: 'trimmed' | 'ahead',
    /** Trimmed: the id just below the oldest kept. Ahead: the stream's last id. */
    readonly bound: string,
  ) {
    super(
      kind === 'trimmed'
        ? `shard ${shard}'s stream was trimmed (EVENTS_MAXLEN) past this cursor: events after ` +
            `it may be lost`
        : `the cursor is ahead of shard ${shard}'s stream (its last id is ${bound}): it was not ` +
            `read from this deployment's events`,
    );
    this.name = 'CursorGapError';
    this.code = kind === 'trimmed' ? 'events_trimmed' : 'cursor_ahead';
  }

  /** The cursor that resumes at the oldest entry kept in the trimmed shard, nothing repeated. */
  resume(cursor: readonly string[]): string[] {
    return cursor.map((id, i) => (i === this.shard ? this.bound : id));
  }
}

/** Reads `XINFO STREAM`'s flat reply (`undefined` for a missing stream) as bounds. */
export function streamBounds(reply: unknown): StreamBounds {
  const fields = new Map<unknown, unknown>();
  if (Array.isArray(reply))
    for (let i = 0; i + 1 < reply.length; i += 2) fields.set(reply[i], reply[i + 1]);
  const added = fields.get('entries-added');
  const first: unknown = fields.get('first-entry');
  return {
    lastGenerated: String(fields.get('last-generated-id') ?? '0-0'),
    first: Array.isArray(first) && typeof first[0] === 'string' ? first[0] : undefined,
    trimmed: typeof added === 'number' && added > Number(fields.get('length')),
  };
}

/** Throws {@link CursorGapError} when reading shard `shard` after `after` would skip entries. */
export function checkGap(shard: number, after: string, bounds: StreamBounds): void {
  if (compareIds(after, bounds.lastGenerated) > 0)
    throw new CursorGapError(shard, 'ahead', bounds.lastGenerated);
  if (!bounds.trimmed) return;
  // Resumes just below the oldest entry kept (after the last written, when none is kept).
  const resume = bounds.first === undefined ? bounds.lastGenerated : idBefore(bounds.first);
  if (compareIds(after, resume) < 0) throw new CursorGapError(shard, 'trimmed', resume);
}

/** The largest stream id below `id` (which is above `0-0`): XRANGE after it starts at `id`. */
export function idBefore(id: string): string {
  const [ms = '0', seq = '0'] = id.split('-');
  if (seq !== '0') return `${ms}-${BigInt(seq) - 1n}`;
  return `${BigInt(ms) - 1n}-${2n ** 64n - 1n}`;
}

/** Checks `cursor` against every stream (one `XINFO STREAM` each); throws {@link CursorGapError}. */
export async function checkCursorGaps(
  redis: Redis,
  streams: readonly string[],
  cursor: readonly string[],
): Promise<void> {
  const replies = await Promise.all(
    streams.map((s) => redis.xinfo('STREAM', s).catch((err: unknown) => noSuchKey(err))),
  );
  replies.forEach((reply, i) => checkGap(i, cursor[i] ?? '0-0', streamBounds(reply)));
}

/** `undefined` for a stream that does not exist yet (nothing written, nothing trimmed). */
export function noSuchKey(err: unknown): undefined {
  if (err instanceof Error && /no such key/i.test(err.message)) return undefined;
  throw err;
}
