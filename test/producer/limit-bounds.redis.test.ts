import { describe, expect, it } from 'vitest';
import { InvalidControlError, type Admin } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { adminOf } from '../support/admin.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

/**
 * A project limit is bounded (a window of at most 24 h, a count of at least 1), one looser than
 * SEND_RATE_LIMIT (here 100/1h) needs `force`, and `show` and the overview render whatever the
 * controls hold, written by hand included, saying what is wrong with it.
 */
describe('project limits: bounds, force, and views of what is stored', () => {
  const ns = useNamespace('limit-bounds');
  const admin = useOpened('admin', () => adminOf(ns(), '100/1h'));
  const keys = () => keysFor(ns().prefix);

  const refusal = (call: (a: Admin) => Promise<unknown>) =>
    call(admin()).then(
      () => undefined,
      (err: unknown) => err,
    );

  it('refuses a window over 24 h and a count below 1, naming the bound', async () => {
    const long = await refusal((a) => a.setProjectLimit('P', '1/200000000d'));
    expect(long).toBeInstanceOf(InvalidControlError);
    expect(long).toMatchObject({ field: 'limit', problem: expect.stringMatching(/at most 24h/) });
    const zero = await refusal((a) => a.setProjectLimit('P', '0/1h'));
    expect(zero).toMatchObject({ field: 'limit', problem: expect.stringMatching(/at least 1/) });
    expect(await ns().redis.exists(keys().projectControls('P'))).toBe(0);
  });

  it('refuses, even forced, a count ACQUIRE cannot count with, and shows a stored one as wrong', async () => {
    // ACQUIRE takes a max of at most 2147483647 (acquire-reads.lua): a larger one stopped every
    // follow-up of the project as a store item error, while show said nothing was wrong.
    const huge = await refusal((a) => a.setProjectLimit('P', '3000000000/1h', { force: true }));
    expect(huge).toMatchObject({ field: 'limit', problem: expect.stringMatching(/2147483647/) });
    expect(await ns().redis.exists(keys().projectControls('P'))).toBe(0);
    expect(await admin().setProjectLimit('P', '2147483647/1h', { force: true })).toMatchObject({
      limit: '2147483647/1h',
    });
    await ns().redis.hset(keys().projectControls('Q'), {
      limit: '3000000000/1h',
      max: '3000000000',
      windowMs: '3601000',
      toleranceMs: '500',
    });
    expect((await admin().showProject('Q')).problem).toMatch(
      /^invalid stored limit "3000000000\/1h": .*2147483647/,
    );
  });

  it('shows as wrong each stored limit ACQUIRE refuses: a fractional window, a bad tolerance', async () => {
    const written: Record<string, Record<string, string>> = {
      fraction: { limit: '5/1h', max: '5', windowMs: '3601000.5', toleranceMs: '500' },
      tolerance: { limit: '5/1h', max: '5', windowMs: '3601000', toleranceMs: 'x' },
      negative: { limit: '5/1h', max: '5', windowMs: '3601000', toleranceMs: '-1' },
      missing: { limit: '5/1h', max: '5', windowMs: '3601000' },
    };
    for (const [projectId, fields] of Object.entries(written)) {
      await ns().redis.hset(keys().projectControls(projectId), fields);
      expect((await admin().showProject(projectId)).problem, projectId).toMatch(
        /^invalid stored limit "5\/1h": /,
      );
    }
  });

  it('refuses a limit looser than SEND_RATE_LIMIT, by count or by rate, unless forced', async () => {
    // 200/2h has the default's rate, but lets 200 go in one hour; 60/40m lets 120 go in one.
    for (const limit of ['200/2h', '60/40m', '101/1h', '2/1m']) {
      const err = await refusal((a) => a.setProjectLimit('P', limit));
      expect(err, limit).toMatchObject({
        field: 'limit',
        problem: expect.stringMatching(/looser than SEND_RATE_LIMIT 100\/1h.*force/),
      });
    }
    expect(await ns().redis.exists(keys().projectControls('P'))).toBe(0);
    for (const limit of ['100/1h', '50/30m', '100/2h', '1/1m', '24/24h'])
      expect(await admin().setProjectLimit('P', limit), limit).toMatchObject({ limit });
    expect(await admin().setProjectLimit('P', '200/2h', { force: true })).toMatchObject({
      limit: '200/2h',
    });
    expect(await admin().showProject('P')).toMatchObject({ limit: '200/2h', problem: null });
  });

  it('shows a project whose stored limit is absurd, saying so, and the other projects too', async () => {
    const written: Record<string, Record<string, string>> = {
      huge: { limit: '1/200000000d', max: '1', windowMs: '17280000000001000', toleranceMs: '500' },
      garbage: { limit: 'fast', max: 'many', windowMs: 'abc', pausedAt: 'yesterday', paused: '1' },
      negative: { limit: '-5/1h', max: '-5', windowMs: '-1', toleranceMs: 'x' },
    };
    for (const [projectId, fields] of Object.entries(written)) {
      await ns().redis.hset(keys().projectControls(projectId), fields);
      await ns().redis.sadd(keys().controlledProjects, projectId);
    }
    // A budget log scored in the far future, and a park that is not a number.
    await ns().redis.zadd(keys().budget('huge'), '1e300', 's:x');
    await ns().redis.set(keys().park('garbage'), 'soon');
    // Wrong types: the controls a string, the park a hash, the budget a list.
    await ns().redis.set(keys().projectControls('typed'), 'paused');
    await ns().redis.hset(keys().park('typed'), 'until', '1');
    await ns().redis.rpush(keys().budget('typed'), 'x');
    await ns().redis.sadd(keys().controlledProjects, 'typed');
    await admin().pauseProject('fine');

    for (const projectId of ['huge', 'garbage', 'negative', 'typed']) {
      const view = await admin().showProject(projectId);
      expect(view.problem, projectId).toMatch(/^invalid stored /);
      expect(JSON.stringify(view)).not.toContain('Invalid');
    }
    expect((await admin().showProject('garbage')).problem).toContain('"abc"');
    const overview = await admin().overview();
    const shown = new Map(overview.projects.map((p) => [p.projectId, p]));
    expect(shown.get('fine')).toMatchObject({ paused: true, problem: null });
    for (const projectId of ['huge', 'garbage', 'negative', 'typed'])
      expect(shown.get(projectId)?.problem, projectId).toMatch(/^invalid stored /);
    expect(overview.problems).toEqual([]);

    // Keys every project shares, of the wrong type: the page lists what it can, and says so.
    await ns().redis.set(ns().eventsStream, 'not a stream');
    await ns().redis.zadd(keys().tracked, Date.now(), 'd1');
    await ns().redis.rpush(keys().dispatch('d1'), 'not a record');
    const partial = await admin().overview();
    expect(partial.problems).toEqual([
      expect.stringMatching(/^invalid stored events stream: WRONGTYPE/),
    ]);
    expect(partial.tracked).toMatchObject([{ dispatchId: 'd1', state: 'unreadable' }]);
    expect(partial.projects.map((p) => p.projectId)).toContain('fine');
  });
});
