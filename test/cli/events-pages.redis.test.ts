import { describe, expect, it } from 'vitest';
import { layoutKey, shardLayout } from '../../src/redis/keys.js';
import { runCliToEnd } from '../support/cli.js';
import { useNamespace, type Namespace } from '../support/namespace.js';

/**
 * `events` pages across shards: `--limit` then `--from` the last printed cursor must print every
 * entry of every shard once, in one order, also when entries are written between the pages.
 */

const SHARDS = 2;

/** The NDJSON lines a command printed, parsed. */
function ndjson(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The events stream of each shard of the namespace. */
function streamsOf(ns: Namespace): string[] {
  return shardLayout(ns.prefix, ns.eventsStream, SHARDS, false).map((s) => s.eventsStream);
}

/** Adds entries with the explicit ids `ids` (so the test picks how shards interleave). */
async function add(ns: Namespace, stream: string, ...ids: string[]): Promise<void> {
  const pipeline = ns.redis.pipeline();
  for (const id of ids)
    pipeline.xadd(stream, id, 'type', 'followup.completed', 'dispatchId', `d${id}`, 'v', '1');
  await pipeline.exec();
}

/** Runs `events` with `args` on the namespace, 2 shards, and returns the lines it printed. */
async function events(ns: Namespace, args: string[]): Promise<Record<string, unknown>[]> {
  const run = await runCliToEnd(['events', ...args], ns.env({ DISPATCH_SHARDS: String(SHARDS) }));
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return ndjson(run.stdout);
}

const dispatchIds = (lines: Record<string, unknown>[]) => lines.map((l) => l['dispatchId']);

describe('agent-dispatch events across shards', () => {
  const ns = useNamespace('events-pages', { shards: SHARDS });

  it('pages with --limit and --from the last cursor without skipping an event', async () => {
    const [s0 = '', s1 = ''] = streamsOf(ns());
    await ns().redis.set(layoutKey(ns().prefix), String(SHARDS));
    // Shard 0 holds more than one read of 500; shard 1 one entry that sorts inside shard 0's
    // second read: a merge of the first reads alone would print it before 1500-0..1549-0.
    await add(ns(), s0, ...Array.from({ length: 600 }, (_, k) => `${1000 + k}-0`));
    await add(ns(), s1, '1550-1');
    const all = [...Array.from({ length: 551 }, (_, k) => `d${1000 + k}-0`), 'd1550-1'];
    all.push(...Array.from({ length: 49 }, (_, k) => `d${1551 + k}-0`));

    const first = await events(ns(), ['--from', 'start', '--limit', '501']);
    expect(first).toHaveLength(501);
    const cursor = String(first.at(-1)?.['cursor']);
    const rest = await events(ns(), ['--from', cursor]);
    expect([...dispatchIds(first), ...dispatchIds(rest)]).toEqual(all);
  });

  it('resumes exactly when a shard writes an entry older than the last printed one', async () => {
    const [s0 = '', s1 = ''] = streamsOf(ns());
    await ns().redis.set(layoutKey(ns().prefix), String(SHARDS));
    await add(ns(), s0, '10-0', '20-0', '30-0', '40-0');
    await add(ns(), s1, '15-0');
    const first = await events(ns(), ['--from', 'start', '--limit', '3']);
    expect(dispatchIds(first)).toEqual(['d10-0', 'd15-0', 'd20-0']);
    // Written after the first page, with an id below its last one (another node's clock, or the
    // same millisecond): a cursor of one position would pass it by.
    await add(ns(), s1, '17-0');
    const rest = await events(ns(), ['--from', String(first.at(-1)?.['cursor'])]);
    expect(dispatchIds(rest)).toEqual(['d17-0', 'd30-0', 'd40-0']);
  });

  /** Shard 0 holds more than one reverse read of 500; shard 1 ties with it on one id. */
  async function addTail(): Promise<string[]> {
    const [s0 = '', s1 = ''] = streamsOf(ns());
    await ns().redis.set(layoutKey(ns().prefix), String(SHARDS));
    await add(ns(), s0, ...Array.from({ length: 600 }, (_, k) => `${1000 + k}-0`));
    await add(ns(), s1, '1590-0', '1595-1', '1700-0');
    return [
      ...Array.from({ length: 591 }, (_, k) => `d${1000 + k}-0`),
      'd1590-0', // shard 1's, after shard 0's 1590-0
      ...Array.from({ length: 5 }, (_, k) => `d${1591 + k}-0`),
      'd1595-1',
      ...Array.from({ length: 4 }, (_, k) => `d${1596 + k}-0`),
      'd1700-0',
    ];
  }

  it('prints the newest N with --limit alone, oldest first, and resumes after them', async () => {
    const merged = await addTail();
    const last = await events(ns(), ['--limit', '12']);
    expect(dispatchIds(last)).toEqual(merged.slice(-12));
    expect(dispatchIds(last)[0]).toBe('d1590-0');
    // The last cursor resumes exactly: only what is written after it comes next.
    const [s0 = '', s1 = ''] = streamsOf(ns());
    await add(ns(), s1, '1701-0');
    await add(ns(), s0, '1702-0');
    const rest = await events(ns(), ['--from', String(last.at(-1)?.['cursor'])]);
    expect(dispatchIds(rest)).toEqual(['d1701-0', 'd1702-0']);
  });

  it('reads back past one fetch, prints all when there are fewer, and --from 0 the oldest', async () => {
    const merged = await addTail();
    expect(dispatchIds(await events(ns(), ['--limit', '550']))).toEqual(merged.slice(-550));
    expect(dispatchIds(await events(ns(), ['--limit', '5000']))).toEqual(merged);
    expect(dispatchIds(await events(ns(), ['--from', '0', '--limit', '2']))).toEqual([
      'd1000-0',
      'd1001-0',
    ]);
  });

  it('counts only the events the filter keeps toward the newest N', async () => {
    const [s0 = '', s1 = ''] = streamsOf(ns());
    await ns().redis.set(layoutKey(ns().prefix), String(SHARDS));
    const failed = (stream: string, id: string) =>
      ns().redis.xadd(stream, id, 'type', 'followup.failed', 'dispatchId', `f${id}`, 'v', '1');
    await failed(s1, '5-0');
    await add(ns(), s0, '10-0', '20-0', '30-0');
    await failed(s1, '25-0');
    await failed(s0, '40-0');
    const two = await events(ns(), ['--type', 'failed', '--limit', '2']);
    expect(dispatchIds(two)).toEqual(['f25-0', 'f40-0']);
    const three = await events(ns(), ['--type', 'failed', '--limit', '3']);
    expect(dispatchIds(three)).toEqual(['f5-0', 'f25-0', 'f40-0']);
  });

  it('refuses with exit 2 a --from the stream was trimmed past, naming the cursor to go on from', async () => {
    const [s0 = '', s1 = ''] = streamsOf(ns());
    await ns().redis.set(layoutKey(ns().prefix), String(SHARDS));
    await add(ns(), s0, '10-0', '20-0', '30-0', '40-0');
    await add(ns(), s1, '15-0');
    await ns().redis.xtrim(s0, 'MAXLEN', 2);
    const run = await runCliToEnd(['events', '--from', '10-0_15-0'], ns().env({}));
    expect(run.stdout).toBe('');
    expect(run.code).toBe(2);
    const below = `29-${2n ** 64n - 1n}`; // just below the oldest kept, 30-0
    expect(run.stderr).toBe(
      `agent-dispatch: --from: shard 0's stream was trimmed (EVENTS_MAXLEN) past this cursor: ` +
        `events after it may be lost; go on from the oldest kept with --from ${below}_15-0\n`,
    );
    expect(dispatchIds(await events(ns(), ['--from', `${below}_15-0`]))).toEqual([
      'd30-0',
      'd40-0',
    ]);
  });

  it('refuses with exit 2 naming DISPATCH_SHARDS a count the fleet did not record', async () => {
    await ns().redis.set(layoutKey(ns().prefix), '3');
    const run = await runCliToEnd(['events'], ns().env({ DISPATCH_SHARDS: String(SHARDS) }));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^agent-dispatch: DISPATCH_SHARDS: .*3/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});
