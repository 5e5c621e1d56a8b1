import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { DispatchStore } from '../../src/store/store.js';
import { createAdmin, createProducer } from '../../src/producer/index.js';
import { keysFor, shardLayout, shardOf } from '../../src/redis/keys.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

const SHARDS = 4;

describe('the operator controls with DISPATCH_SHARDS=4', () => {
  const ns = useNamespace('admin-shards', { scope: 'all', shards: SHARDS });
  const common = () => ({
    redisUrl: ns().redisUrl,
    prefix: ns().prefix,
    eventsStream: ns().eventsStream,
  });
  const admin = useOpened('admin', () => createAdmin({ ...common(), shards: SHARDS }), 'all');
  const producer = useOpened(
    'producer',
    () => createProducer({ ...common(), shards: SHARDS, durability: { mode: 'none' } }),
    'all',
  );
  const layout = () => shardLayout(ns().prefix, ns().eventsStream, SHARDS, false);
  // Two projects in different shards, neither in shard 0.
  const projects = () => {
    const found = new Map<number, string>();
    for (let i = 0; found.size < 2; i++) {
      const shard = shardOf(`p${i}`, SHARDS);
      if (shard !== 0 && !found.has(shard)) found.set(shard, `p${i}`);
    }
    return [...found.entries()];
  };

  it('pauses and limits a project in its own shard, where ACQUIRE reads it', async () => {
    for (const [shard, projectId] of projects()) {
      await admin().pauseProject(projectId);
      await admin().setProjectLimit(projectId, '5/1h');
      for (const [i, s] of layout().entries()) {
        const fields = await ns().redis.hgetall(keysFor(s.prefix).projectControls(projectId));
        if (i === shard) expect(fields).toMatchObject({ paused: '1', max: expect.any(String) });
        else expect(fields).toEqual({});
      }
      expect(await admin().showProject(projectId)).toMatchObject({ paused: true, limit: '5/1h' });
    }
    expect(await admin().controlledProjects()).toEqual(
      projects()
        .map(([, p]) => p)
        .sort(),
    );
  });

  it('cancels a follow-up in the shard that holds it, its event on that shard’s stream', async () => {
    const [[shard, projectId]] = projects() as [[number, string]];
    const { dispatchId } = await producer().send({ projectId, jobId: 'j', prompt: 'hello' });
    expect(await admin().cancel(dispatchId)).toMatchObject({
      state: 'done',
      type: 'followup.cancelled',
    });
    const stream = (layout()[shard] as { eventsStream: string }).eventsStream;
    const entries = await ns().redis.xrange(stream, '-', '+');
    expect(entries.map(([, f]) => f[f.indexOf('dispatchId') + 1])).toEqual([dispatchId]);
    await expect(producer().cancel(dispatchId)).rejects.toMatchObject({ code: 'not_cancellable' });
  });

  it('shows every shard on the follow-ups page: both paused projects and the cancelled event', async () => {
    const overview = await admin().overview();
    const shown = new Map(overview.projects.map((p) => [p.projectId, p.paused]));
    for (const [, projectId] of projects()) expect(shown.get(projectId)).toBe(true);
    expect(overview.events.map((e) => e.type)).toEqual(['followup.cancelled']);
  });

  it('pages the projects of every shard by 100, each once, with exact counts', async () => {
    await producer().sendMany(
      Array.from({ length: 150 }, (_, i) => ({ projectId: `page-${i}`, jobId: 'j', prompt: 'x' })),
    );
    const first = await admin().overview();
    const second = await admin().overview({ projectsPage: 1 });
    // The two paused projects of the first test and the 150 new ones.
    expect(first.projectsTotal).toBe(152);
    expect(first.projects).toHaveLength(100);
    expect(second.projects).toHaveLength(52);
    const names = [...first.projects, ...second.projects].map((p) => p.projectId);
    expect(new Set(names).size).toBe(152);
    const queued = [...first.projects, ...second.projects].reduce((sum, p) => sum + p.queued, 0);
    expect(queued).toBe(150);
  });

  it('redrives a dead letter of another shard than 0 in its own shard', async () => {
    const [[shard, projectId]] = projects() as [[number, string]];
    const at = layout()[shard] as { prefix: string; eventsStream: string };
    const store = new DispatchStore(ns().redis, keysFor(at.prefix), {
      eventsStream: at.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 600_000,
    });
    const { dispatchId } = await producer().send({ projectId, jobId: 'dead', prompt: 'again' });
    await store.finish((await store.sends.get(dispatchId))!, {
      type: EVENT_TYPES.undeliverable,
      reason: 'not_found',
    });
    expect((await admin().deadLetters()).map((d) => d.dispatchId)).toEqual([dispatchId]);
    const { redrivenTo, created } = await admin().redrive(dispatchId);
    expect(created).toBe(true);
    expect(await store.sends.get(redrivenTo)).toMatchObject({ prompt: 'again', state: 'queued' });
    expect((await admin().followUp(dispatchId))?.redrivenTo).toBe(redrivenTo);
    expect(await admin().search(`redrive:${dispatchId}`)).toEqual([redrivenTo]);
  });

  it('redrives by a filter across shards, the oldest end first whatever its shard', async () => {
    const ended: { id: string; at: number; shard: number }[] = [];
    for (const [n, [shard, projectId]] of projects().entries()) {
      const at = layout()[shard] as { prefix: string; eventsStream: string };
      const keys = keysFor(at.prefix);
      const store = new DispatchStore(ns().redis, keys, {
        eventsStream: at.eventsStream,
        eventsMaxLen: 1000,
        retentionMs: 600_000,
      });
      for (const i of [0, 1, 2]) {
        const { dispatchId } = await producer().send({ projectId, jobId: `m${i}`, prompt: 'x' });
        await store.finish((await store.sends.get(dispatchId))!, {
          type: EVENT_TYPES.timedOut,
        });
        // Interleaved end times: shard of project 0 at 0, 2, 4 s ago... of project 1 at 1, 3, 5.
        const endedAt = Date.now() - 60_000 + (2 * i + n) * 1_000;
        await ns().redis.zadd(keys.deadLetters, endedAt, dispatchId);
        ended.push({ id: dispatchId, at: endedAt, shard });
      }
    }
    const oldest = ended.sort((a, b) => a.at - b.at).map((e) => e.id);
    const dry = await admin().redriveDeadLetters({ reason: 'timed_out', limit: 4, dryRun: true });
    expect(dry.map((r) => r.dispatchId)).toEqual(oldest.slice(0, 4));
    const done = await admin().redriveDeadLetters({ reason: 'timed_out', limit: 4 });
    expect(done.map((r) => r.dispatchId)).toEqual(oldest.slice(0, 4));
    expect(done.every((r) => 'created' in r && r.created)).toBe(true);
    const rest = await admin().redriveDeadLetters({ reason: 'timed_out' });
    expect(rest.map((r) => r.dispatchId)).toEqual(oldest.slice(4));
  });
});
