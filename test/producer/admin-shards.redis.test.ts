import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdmin,
  createProducer,
  type Admin,
  type Producer,
} from '../../src/producer/index.js';
import { keysFor, shardLayout, shardOf } from '../../src/redis/keys.js';
import { createNamespace, type Namespace } from '../support/namespace.js';

const SHARDS = 4;

describe('the operator controls with DISPATCH_SHARDS=4', () => {
  let ns: Namespace;
  let admin: Admin;
  let producer: Producer;
  const layout = () => shardLayout(ns.prefix, ns.eventsStream, SHARDS, false);
  // Two projects in different shards, neither in shard 0.
  const projects = () => {
    const found = new Map<number, string>();
    for (let i = 0; found.size < 2; i++) {
      const shard = shardOf(`p${i}`, SHARDS);
      if (shard !== 0 && !found.has(shard)) found.set(shard, `p${i}`);
    }
    return [...found.entries()];
  };

  beforeAll(() => {
    ns = createNamespace('admin-shards');
    const common = { redisUrl: ns.redisUrl, prefix: ns.prefix, eventsStream: ns.eventsStream };
    admin = createAdmin({ ...common, shards: SHARDS });
    producer = createProducer({
      ...common,
      shards: SHARDS,
      durability: { mode: 'none' },
    });
  });
  afterAll(async () => {
    await producer?.close();
    await admin?.close();
    for (const shard of layout()) {
      const keys = await ns.redis.keys(`${shard.prefix}*`);
      if (keys.length > 0) await ns.redis.unlink(...keys);
      await ns.redis.unlink(shard.eventsStream);
    }
    await ns?.cleanup();
  });

  it('pauses and limits a project in its own shard, where ACQUIRE reads it', async () => {
    for (const [shard, projectId] of projects()) {
      await admin.pauseProject(projectId);
      await admin.setProjectLimit(projectId, '5/1m');
      for (const [i, s] of layout().entries()) {
        const fields = await ns.redis.hgetall(keysFor(s.prefix).projectControls(projectId));
        if (i === shard) expect(fields).toMatchObject({ paused: '1', max: expect.any(String) });
        else expect(fields).toEqual({});
      }
      expect(await admin.showProject(projectId)).toMatchObject({ paused: true, limit: '5/1m' });
    }
    expect(await admin.controlledProjects()).toEqual(
      projects()
        .map(([, p]) => p)
        .sort(),
    );
  });

  it('cancels a follow-up in the shard that holds it, its event on that shard’s stream', async () => {
    const [[shard, projectId]] = projects() as [[number, string]];
    const { dispatchId } = await producer.send({ projectId, jobId: 'j', prompt: 'hello' });
    expect(await admin.cancel(dispatchId)).toMatchObject({
      state: 'done',
      type: 'followup.cancelled',
    });
    const stream = (layout()[shard] as { eventsStream: string }).eventsStream;
    const entries = await ns.redis.xrange(stream, '-', '+');
    expect(entries.map(([, f]) => f[f.indexOf('dispatchId') + 1])).toEqual([dispatchId]);
    await expect(producer.cancel(dispatchId)).rejects.toMatchObject({ code: 'not_cancellable' });
  });

  it('shows every shard on the follow-ups page: both paused projects and the cancelled event', async () => {
    const overview = await admin.overview();
    const shown = new Map(overview.projects.map((p) => [p.projectId, p.paused]));
    for (const [, projectId] of projects()) expect(shown.get(projectId)).toBe(true);
    expect(overview.events.map((e) => e.type)).toEqual(['followup.cancelled']);
  });
});
