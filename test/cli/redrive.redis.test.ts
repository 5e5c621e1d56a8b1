import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { DispatchStore } from '../../src/store/store.js';
import { createProducer } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { runCliToEnd } from '../support/cli.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

/** `agent-dispatch redrive` as a process: by ids, by a filter, a dry run, and a refusal. */
describe('agent-dispatch redrive', () => {
  const ns = useNamespace('cli-redrive', { scope: 'all' });
  const producer = useOpened(
    'producer',
    () => createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix }),
    'all',
  );
  const run = (...args: string[]) => runCliToEnd(args, ns().env());
  const lines = (stdout: string) =>
    stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  /** A follow-up of project `projectId` ended undeliverable with `reason`. */
  async function deadLetter(projectId: string, jobId: string, reason: string) {
    const store = new DispatchStore(ns().redis, keysFor(ns().prefix), {
      eventsStream: ns().eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 600_000,
    });
    const { dispatchId } = await producer().send({ projectId, jobId, prompt: `p ${jobId}` });
    const record = await store.sends.get(dispatchId);
    await store.finish(record!, { type: EVENT_TYPES.undeliverable, reason });
    return dispatchId;
  }

  it('redrives by a filter (after a dry run), then by id, idempotently; refuses one not ended', async () => {
    const a = await deadLetter('docs', 'a', 'not_found');
    const b = await deadLetter('docs', 'b', 'http_400');
    const other = await deadLetter('web', 'c', 'not_found');

    const dry = await run('redrive', '--project', 'docs', '--reason', 'not_found', '--dry-run');
    expect(dry.code).toBe(0);
    expect(lines(dry.stdout)).toMatchObject([{ dispatchId: a, reason: 'not_found' }]);
    expect(await ns().redis.hget(keysFor(ns().prefix).dispatch(a), 'redrivenTo')).toBeNull();

    const byFilter = await run('redrive', '--project', 'docs', '--reason', 'not_found');
    expect(byFilter.code).toBe(0);
    const [first] = lines(byFilter.stdout);
    expect(first).toMatchObject({ dispatchId: a, created: true });

    const byIds = await run('redrive', a, b);
    expect(byIds.code).toBe(0);
    expect(lines(byIds.stdout)).toMatchObject([
      { dispatchId: a, redrivenTo: first?.['redrivenTo'], created: false },
      { dispatchId: b, created: true },
    ]);
    const { dispatchId: queued } = await producer().send({
      projectId: 'web',
      jobId: 'q',
      prompt: 'q',
    });
    const refused = await run('redrive', other, queued);
    expect(refused.code).toBe(1);
    expect(lines(refused.stdout)).toMatchObject([
      { dispatchId: other, created: true },
      { dispatchId: queued, why: 'not_ended' },
    ]);
    expect((await run('redrive', a, '--project', 'docs')).code).toBe(2);
    expect((await run('redrive', '--since', 'yesterday')).stderr).toMatch(/--since: must be/);
  }, 60_000);

  it('--since selects by end time (a duration back or an ISO time); --dry-run sends nothing', async () => {
    const keys = keysFor(ns().prefix);
    const old = await deadLetter('since', 'old', 'not_found');
    const recent = await deadLetter('since', 'new', 'not_found');
    await ns().redis.zadd(keys.deadLetters, Date.now() - 3 * 3_600_000, old);
    const waiting = () => ns().redis.llen(keys.dispatchQueue('wait'));
    const before = await waiting();

    const dry = await run('redrive', '--project', 'since', '--since', '2h', '--dry-run');
    expect(dry.code).toBe(0);
    expect(lines(dry.stdout)).toMatchObject([{ dispatchId: recent, dryRun: true }]);
    expect(dry.stderr).toMatch(/1 would be redriven \(dry run\)/);
    expect(await waiting()).toBe(before);
    expect(await ns().redis.hget(keys.dispatch(recent), 'redrivenTo')).toBeNull();

    const since = await run('redrive', '--project', 'since', '--since', '2h');
    expect(lines(since.stdout)).toMatchObject([{ dispatchId: recent, created: true }]);
    const iso = new Date(Date.now() - 4 * 3_600_000).toISOString();
    const all = await run('redrive', '--project', 'since', '--since', iso);
    expect(lines(all.stdout)).toMatchObject([{ dispatchId: old, created: true }]);
    expect(await waiting()).toBe(before + 2);
  }, 60_000);

  it('redrives a few thousand dead letters 500 at a time, oldest end first, stopping at --limit', async () => {
    const keys = keysFor(ns().prefix);
    const store = new DispatchStore(ns().redis, keys, {
      eventsStream: ns().eventsStream,
      eventsMaxLen: 10_000,
      retentionMs: 600_000,
    });
    const total = 3_000;
    const sent = await producer().sendMany(
      Array.from({ length: total }, (_, i) => ({
        projectId: 'bulk',
        jobId: `j${i}`,
        prompt: `p${i}`,
      })),
    );
    const ids = sent.map((r) => r.dispatchId);
    for (let i = 0; i < total; i += 500) {
      const records = await Promise.all(ids.slice(i, i + 500).map((id) => store.sends.get(id)));
      await Promise.all(records.map((r) => store.finish(r!, { type: EVENT_TYPES.timedOut })));
    }
    // Each its own end time, in the order sent: the index orders them as they ended.
    const base = Date.now() - 60_000;
    await ns().redis.zadd(keys.deadLetters, ...ids.flatMap((id, i) => [base + i, id]));
    const dead = () => ns().redis.zcard(keys.deadLetters);
    expect(await dead()).toBe(total);

    const first = await run(
      'redrive',
      '--project',
      'bulk',
      '--reason',
      'timed_out',
      '--limit',
      '1200',
    );
    expect(first.code).toBe(0);
    const answers = lines(first.stdout);
    expect(answers.map((a) => a['dispatchId'])).toEqual(ids.slice(0, 1200));
    expect(answers.every((a) => a['created'] === true)).toBe(true);
    expect(first.stderr).toMatch(
      /1200 redriven, 0 already redriven, 0 refused; stopped at --limit 1200/,
    );
    expect(await dead()).toBe(total - 1200);

    const rest = await run('redrive', '--project', 'bulk', '--limit', '5000');
    expect(lines(rest.stdout).map((a) => a['dispatchId'])).toEqual(ids.slice(1200));
    expect(rest.stderr).toMatch(/1800 redriven/);
    expect(await dead()).toBe(0);
    expect((await run('redrive', '--project', 'bulk')).stdout).toBe('');
  }, 120_000);
});
