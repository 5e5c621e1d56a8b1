import { describe, expect, it } from 'vitest';
import { CursorGapError } from '../../src/store/event-gaps.js';
import {
  formatCursor,
  parseCursor,
  readEventPage,
  startCursor,
  type Cursor,
} from '../../src/store/event-pages.js';
import { useNamespace } from '../support/namespace.js';

/**
 * The pager against a real Redis: pages of random sizes over 3 shards' streams, with entries
 * written between the pages whose ids sort before what was already read (as another node's clock
 * makes them), read every entry exactly once, and each page in one order.
 */

/** A small deterministic generator, so that a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** Entries as `shard:id`, in the one order of the pages: by id (ms, then seq), then shard. */
function inOrder(keys: readonly string[]): string[] {
  const parts = (key: string) => key.split(/[:-]/).map(Number) as [number, number, number];
  return [...keys].sort((a, b) => {
    const [as, am, aq] = parts(a);
    const [bs, bm, bq] = parts(b);
    return am - bm || aq - bq || as - bs;
  });
}

describe('readEventPage', () => {
  const ns = useNamespace('event-pages');
  const streams = () => [0, 1, 2].map((i) => `${ns().prefix}:events:${i}`);
  const next = random(7);

  /** Appends `count` entries to random shards, each shard's clock moving on its own. */
  async function write(clocks: number[], count: number): Promise<string[]> {
    const written: string[] = [];
    for (let k = 0; k < count; k++) {
      const shard = Math.floor(next() * 3);
      clocks[shard] = (clocks[shard] ?? 0) + 1 + Math.floor(next() * 20);
      const id = await ns().redis.xadd(streams()[shard] ?? '', `${clocks[shard]}-*`, 'n', '1');
      written.push(`${shard}:${id}`);
    }
    return written;
  }

  /**
   * Reads pages of random sizes (and short XRANGEs) after `cursor`; `between` runs after each and
   * says whether it wrote more: the pages end once one caught up and nothing more was written.
   */
  async function pages(cursor: Cursor, between: () => Promise<boolean>): Promise<string[]> {
    const read: string[] = [];
    for (let round = 0; round < 500; round++) {
      const limit = 1 + Math.floor(next() * 40);
      // Short reads, so that a page reads a shard again before it merges past its buffer.
      const fetchMax = 1 + Math.floor(next() * 6);
      const page = await readEventPage(ns().redis, streams(), cursor, { limit, fetchMax });
      read.push(...page.entries.map((e) => `${e.shard}:${e.id}`));
      cursor = parseCursor(page.entries.at(-1)?.cursor ?? formatCursor(page.next), 3);
      expect(cursor).toEqual(page.next);
      if (!(await between()) && page.caughtUp) return read;
    }
    throw new Error('the pages did not catch up');
  }

  it('pages what the shards hold in one order: by id, then shard, across pages', async () => {
    const written = await write([1000, 1000, 1000], 300);
    const read = await pages(startCursor(3), async () => false);
    expect(read).toEqual(inOrder(written));
  });

  it('reads every entry once while shards append ids below what was read', async () => {
    const clocks = [1000, 1000, 1000];
    const written = await write(clocks, 100);
    let rounds = 0;
    // Between pages, shards write more, from clocks that lag each other.
    const read = await pages(startCursor(3), async () => {
      if (++rounds > 60) return false;
      written.push(...(await write(clocks, Math.floor(next() * 6))));
      return true;
    });
    expect(inOrder(read)).toEqual(inOrder(written));
    expect(new Set(read).size).toBe(read.length);
  });

  it('keeps only the filtered entries, and its cursor still moves past the others', async () => {
    const stream = `${ns().prefix}:events:f`;
    for (const [id, type] of [
      ['1-0', 'followup.completed'],
      ['2-0', 'followup.failed'],
      ['3-0', 'followup.failed'],
    ] as const)
      await ns().redis.xadd(stream, id, 'type', type);
    const filter = { types: new Set(['followup.completed']), projects: new Set<string>() };
    const page = await readEventPage(ns().redis, [stream], startCursor(1), { limit: 10, filter });
    expect(page.entries.map((e) => e.id)).toEqual(['1-0']);
    expect(page).toMatchObject({ next: ['3-0'], caughtUp: true });
    const bounded = await readEventPage(ns().redis, [stream], startCursor(1), {
      limit: 10,
      filter: { types: new Set(['followup.cancelled']), projects: new Set<string>() },
      scanMax: 2,
    });
    expect(bounded).toMatchObject({ entries: [], next: ['2-0'], caughtUp: false });
  });

  it('says when a stream was trimmed past the cursor, or the cursor is ahead of it', async () => {
    const stream = `${ns().prefix}:events:t`;
    for (let ms = 1; ms <= 10; ms++) await ns().redis.xadd(stream, `${ms}-0`, 'n', '1');
    // EVENTS_MAXLEN at work: 1-0..5-0 go, the reader stood at 3-0, so 4-0 and 5-0 are lost.
    await ns().redis.xtrim(stream, 'MAXLEN', 5);
    const read = (after: string, fromStart = false) =>
      readEventPage(ns().redis, [stream], [after], { limit: 20, fromStart });
    const trimmed = await read('3-0').catch((err: unknown) => err);
    expect(trimmed).toBeInstanceOf(CursorGapError);
    // It resumes just below the oldest kept, 6-0.
    const below = `5-${2n ** 64n - 1n}`;
    expect(trimmed).toMatchObject({ kind: 'trimmed', shard: 0, bound: below });
    expect((trimmed as CursorGapError).resume(['3-0'])).toEqual([below]);
    const ids = async (after: string, fromStart?: boolean) =>
      (await read(after, fromStart)).entries.map((e) => e.id);
    // From the resume cursor, and from the start, the oldest kept follows: nothing is repeated.
    expect(await ids(below)).toEqual(['6-0', '7-0', '8-0', '9-0', '10-0']);
    expect(await ids('0-0', true)).toEqual(['6-0', '7-0', '8-0', '9-0', '10-0']);
    expect(await ids('7-0')).toEqual(['8-0', '9-0', '10-0']);
    // Another deployment's cursor, ahead of all this stream ever wrote, would read nothing for ever.
    await expect(read('99-0')).rejects.toMatchObject({ kind: 'ahead', bound: '10-0' });
  });
});
