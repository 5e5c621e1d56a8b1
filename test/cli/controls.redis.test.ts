import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { keysFor, shardLayout, shardOf } from '../../src/redis/keys.js';
import { recordShardCount } from '../../src/redis/layout.js';
import { runCliToEnd } from '../support/cli.js';
import { readEvents } from '../support/events.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';
import { createProducer } from '../../src/producer/index.js';
import { DispatchStore } from '../../src/store/store.js';
import { budgetRate } from '../../src/dispatch/budget.js';

/** `agent-dispatch cancel` and `agent-dispatch project ...` as processes. */
describe('the control commands', () => {
  const ns = useNamespace('cli-controls', { scope: 'all' });
  const producer = useOpened(
    'producer',
    () => createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix }),
    'all',
  );

  const run = (...args: string[]) => runCliToEnd(args, ns().env({ SEND_RATE_LIMIT: '100/1h' }));
  const json = (stdout: string) => JSON.parse(stdout) as Record<string, unknown>;

  it('answer --help with their usage and an example', async () => {
    const cancel = await run('cancel', '--help');
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toMatch(/Usage: agent-dispatch cancel DISPATCH_ID/);
    expect(cancel.stdout).toMatch(/followup\.cancelled/);
    const project = await run('project', '--help');
    expect(project.code).toBe(0);
    const texts = ['project pause P', 'project limit P --clear', 'show P', 'unpark P', 'Example:'];
    for (const text of texts) expect(project.stdout).toContain(text);
    const top = await run('--help');
    expect(top.stdout).toMatch(/cancel +cancels a follow-up/);
    expect(top.stdout).toMatch(/project +pauses, resumes, limits, shows or unparks/);
  });

  it('pause, limit, show, clear and resume a project, each printing one JSON object', async () => {
    const paused = await run('project', 'pause', 'docs');
    expect([paused.code, json(paused.stdout)]).toEqual([
      0,
      { projectId: 'docs', paused: true, changed: true, woken: 0 },
    ]);
    const limited = await run('project', 'limit', 'docs', '50/1h');
    expect(json(limited.stdout)).toEqual({ projectId: 'docs', limit: '50/1h', previous: null });
    const shown = await run('project', 'show', 'docs');
    expect(shown.code).toBe(0);
    expect(json(shown.stdout)).toMatchObject({
      projectId: 'docs',
      paused: true,
      limit: '50/1h',
      limitSource: 'project',
      queued: 0,
      countsExact: true,
    });
    const cleared = await run('project', 'limit', 'docs', '--clear');
    expect(json(cleared.stdout)).toEqual({ projectId: 'docs', limit: null, previous: '50/1h' });
    const resumed = await run('project', 'resume', 'docs');
    expect(json(resumed.stdout)).toMatchObject({ paused: false, changed: true });
    expect(json((await run('project', 'show', 'docs')).stdout)).toMatchObject({
      paused: false,
      limit: '100/1h',
      limitSource: 'default',
    });
  }, 60_000);

  it('refuses bad input with exit 2 naming the field, and changes nothing', async () => {
    const keys = keysFor(ns().prefix);
    const bad = await run('project', 'limit', 'other', '50 an hour');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('limit: expected N/DURATION such as 50/1h, got "50 an hour"');
    const usages = [
      ['project', 'limit', 'other'],
      ['project', 'limit', 'other', '5/1h', '--clear'],
      ['project', 'pause'],
      ['project', 'stop', 'other'],
      ['cancel'],
    ];
    const answers = await Promise.all(usages.map((args) => run(...args)));
    answers.forEach((res, i) => {
      expect(res.code, usages[i]?.join(' ')).toBe(2);
      expect(res.stderr).toMatch(/^agent-dispatch: /);
    });
    expect(await ns().redis.exists(keys.projectControls('other'))).toBe(0);
  }, 60_000);

  it('bounds a limit, needs --force for one looser than SEND_RATE_LIMIT, and shows any stored limit', async () => {
    const keys = keysFor(ns().prefix);
    const long = await run('project', 'limit', 'B', '1/200000000d');
    expect([long.code, long.stderr]).toEqual([
      2,
      'agent-dispatch: limit: the window must be at least 1ms and at most 24h, got "1/200000000d"\n',
    ]);
    const loose = await run('project', 'limit', 'B', '200/2h');
    expect(loose.code).toBe(2);
    expect(loose.stderr).toMatch(
      /^agent-dispatch: limit: 200\/2h is looser than SEND_RATE_LIMIT 100\/1h.*--force/,
    );
    expect(await ns().redis.exists(keys.projectControls('B'))).toBe(0);
    const forced = await run('project', 'limit', 'B', '200/2h', '--force');
    expect([forced.code, json(forced.stdout)]).toEqual([
      0,
      { projectId: 'B', limit: '200/2h', previous: null },
    ]);
    // A limit written by hand past any check, with a send in its window: a next slot past any date.
    await ns().redis.hset(keys.projectControls('B'), {
      limit: '1/200000000d',
      max: '1',
      windowMs: '17280000001000000',
    });
    await ns().redis.zadd(keys.budget('B'), Date.now(), 's:one');
    const shown = await run('project', 'show', 'B');
    expect(shown.code, shown.stderr).toBe(0);
    expect(json(shown.stdout)).toMatchObject({
      limit: '1/200000000d',
      sendsInWindow: 1,
      nextSlotAt: null,
      problem: expect.stringMatching(
        /^invalid stored limit "1\/200000000d": windowMs "17280000001000000" .* ACQUIRE refuses/,
      ),
    });
  }, 60_000);

  it('cancels a queued follow-up; refuses with exit 1 one being sent, a finished one, an unknown id', async () => {
    const [queued, sending] = await producer().sendMany([
      { projectId: 'c', jobId: 'a', prompt: 'one' },
      { projectId: 'c', jobId: 'b', prompt: 'two' },
    ]);
    const store = new DispatchStore(ns().redis, keysFor(ns().prefix), {
      eventsStream: ns().eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
    });
    const rate = budgetRate({ max: 100, windowMs: 3_600_000 });
    const ref = { dispatchId: sending?.dispatchId ?? '', projectId: 'c', jobId: 'b' };
    expect((await store.acquire(ref, rate, rate.toleranceMs, 60_000, randomUUID())).kind).toBe(
      'go',
    );

    const ok = await run('cancel', queued?.dispatchId ?? '');
    expect(ok.code).toBe(0);
    expect(json(ok.stdout)).toEqual({
      dispatchId: queued?.dispatchId,
      state: 'done',
      type: 'followup.cancelled',
    });
    const again = await run('cancel', queued?.dispatchId ?? '');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('is finished (done): only a queued one can be cancelled');
    const busy = await run('cancel', sending?.dispatchId ?? '');
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain('is being sent (sending)');
    const unknown = await run('cancel', 'no-such-id');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no follow-up with dispatchId "no-such-id"');
    const events = await readEvents(ns().redis, ns().eventsStream);
    expect(events.map((e) => [e.type, e.dispatchId])).toEqual([
      ['followup.cancelled', queued?.dispatchId],
    ]);
    expect((await store.sends.get(ref.dispatchId))?.state).toBe('sending');
  }, 60_000);
});

/** The same commands on a fleet that recorded DISPATCH_SHARDS=4, as its roles do at start. */
describe('the control commands on a 4-shard fleet', () => {
  const SHARDS = 4;
  const ns = useNamespace('cli-shards', { scope: 'all', shards: SHARDS });
  const run = (env: Record<string, string>, ...args: string[]) => runCliToEnd(args, ns().env(env));
  // A project outside shard 0, where a tool with the default of 1 would look.
  const projectId = Array.from({ length: 50 }, (_, i) => `p${i}`).find(
    (p) => shardOf(p, SHARDS) !== 0,
  ) as string;

  it('status, project pause and cancel use the recorded count, and refuse a DISPATCH_SHARDS that differs', async () => {
    await recordShardCount(ns().redis, ns().prefix, SHARDS);
    const producer = createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      shards: SHARDS,
    });
    const { dispatchId } = await producer
      .send({ projectId, jobId: 'j', prompt: 'hello' })
      .finally(() => producer.close());
    const [unset, set, refused] = await Promise.all([
      run({}, 'status', dispatchId),
      run({ DISPATCH_SHARDS: '4' }, 'status', dispatchId),
      run({ DISPATCH_SHARDS: '2' }, 'project', 'pause', projectId),
    ]);
    for (const res of [unset, set]) {
      expect(res.code, res.stderr).toBe(0);
      expect(JSON.parse(res.stdout)).toMatchObject({ dispatchId, state: 'queued' });
    }
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^agent-dispatch: DISPATCH_SHARDS: is 2, but the fleet on this Redis runs with 4: [^\n]*\n$/,
    );
    const controls = (shard: number) =>
      keysFor(
        shardLayout(ns().prefix, ns().eventsStream, SHARDS, false)[shard]?.prefix ?? '',
      ).projectControls(projectId);
    expect(await ns().redis.exists(controls(shardOf(projectId, SHARDS)))).toBe(0);
    const paused = await run({}, 'project', 'pause', projectId);
    expect([paused.code, JSON.parse(paused.stdout)]).toEqual([
      0,
      { projectId, paused: true, changed: true, woken: 0 },
    ]);
    expect(await ns().redis.hget(controls(shardOf(projectId, SHARDS)), 'paused')).toBe('1');
    const cancelled = await run({}, 'cancel', dispatchId);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ type: 'followup.cancelled' });
  }, 120_000);
});
