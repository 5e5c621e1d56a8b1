import { afterAll, describe, expect, it } from 'vitest';
import { createAdmin, createProducer } from '../../src/producer/index.js';
import { keysFor, layoutKey, shardLayout, shardOf } from '../../src/redis/keys.js';
import { LayoutError, recordShardCount } from '../../src/redis/layout.js';
import { expectNoLeakedHandles, startTestServer } from '../http/fixture.js';
import { useNamespace } from '../support/namespace.js';

const SHARDS = 4;
const TOKEN = 'fleet-layout-token';

afterAll(() => expectNoLeakedHandles());

/**
 * The operator tools on a fleet that recorded DISPATCH_SHARDS=4 (as its roles do at start): without
 * the setting they use the recorded count; with another count they refuse, changing nothing.
 */
describe('the tools read the shard count the fleet recorded', () => {
  const ns = useNamespace('fleet-layout', { shards: SHARDS });
  const common = () => ({
    redisUrl: ns().redisUrl,
    prefix: ns().prefix,
    eventsStream: ns().eventsStream,
  });
  // A project outside shard 0, where a one-shard tool would look.
  const projectId = Array.from({ length: 50 }, (_, i) => `p${i}`).find(
    (p) => shardOf(p, SHARDS) !== 0,
  ) as string;
  const controlsIn = (shard: number) =>
    keysFor(
      (shardLayout(ns().prefix, ns().eventsStream, SHARDS, false)[shard] ?? { prefix: '' }).prefix,
    ).projectControls(projectId);

  async function using<T extends { close(): Promise<void> }, R>(
    tool: T,
    use: (t: T) => Promise<R>,
  ) {
    try {
      return await use(tool);
    } finally {
      await tool.close();
    }
  }

  it('pauses a project in its shard, and finds and cancels its follow-up, without DISPATCH_SHARDS', async () => {
    await recordShardCount(ns().redis, ns().prefix, SHARDS);
    const paused = await using(createAdmin(common()), (admin) => admin.pauseProject(projectId));
    expect(paused).toMatchObject({ paused: true, changed: true });
    expect(await ns().redis.hget(controlsIn(shardOf(projectId, SHARDS)), 'paused')).toBe('1');
    const { dispatchId } = await using(
      createProducer({ ...common(), durability: { mode: 'none' } }),
      (producer) => producer.send({ projectId, jobId: 'j', prompt: 'hello' }),
    );
    await using(createProducer(common()), async (producer) => {
      expect(await producer.status(dispatchId)).toMatchObject({ state: 'queued', projectId });
      expect(await producer.cancel(dispatchId)).toMatchObject({ type: 'followup.cancelled' });
    });
  });

  it('a producer used before the fleet recorded its count sends to the shard the fleet reads', async () => {
    await using(createProducer({ ...common(), durability: { mode: 'none' } }), async (producer) => {
      // Before any role started (fresh Redis): no record yet, so nothing to read but the default.
      expect(await producer.status('not-yet')).toBeNull();
      // The fleet starts with 4 shards and records it, as its roles do.
      await recordShardCount(ns().redis, ns().prefix, SHARDS);
      const { dispatchId } = await producer.send({ projectId, jobId: 'j', prompt: 'hello' });
      const own = shardLayout(ns().prefix, ns().eventsStream, SHARDS, false)[
        shardOf(projectId, SHARDS)
      ];
      expect(await ns().redis.exists(keysFor(own?.prefix ?? '').dispatch(dispatchId))).toBe(1);
    });
  });

  it('refuses a DISPATCH_SHARDS that differs from the record, or a record that is not a count', async () => {
    await recordShardCount(ns().redis, ns().prefix, SHARDS);
    const refused = await using(createAdmin({ ...common(), shards: 2 }), (admin) =>
      admin.pauseProject(projectId).catch((err: unknown) => err),
    );
    expect(refused).toBeInstanceOf(LayoutError);
    expect(refused).toMatchObject({ code: 'layout_mismatch', setting: 'DISPATCH_SHARDS' });
    expect((refused as Error).message).toMatch(
      /^DISPATCH_SHARDS: is 2, but the fleet .* runs with 4/,
    );
    for (let shard = 0; shard < SHARDS; shard++)
      expect(await ns().redis.exists(controlsIn(shard))).toBe(0);
    await using(createProducer({ ...common(), shards: 1 }), async (producer) => {
      await expect(producer.status('x')).rejects.toMatchObject({ code: 'layout_mismatch' });
    });
    await ns().redis.set(layoutKey(ns().prefix), 'four');
    await using(createAdmin(common()), async (admin) => {
      await expect(admin.showProject(projectId)).rejects.toMatchObject({
        code: 'layout_mismatch',
        message: expect.stringMatching(
          /^DISPATCH_SHARDS: the fleet's record of it .* holds "four"/,
        ),
      });
    });
  });

  it('answers 500 naming DISPATCH_SHARDS over HTTP, and changes nothing', async () => {
    await recordShardCount(ns().redis, ns().prefix, SHARDS);
    const app = await startTestServer(ns().config({ OPERATOR_TOKEN: TOKEN, DISPATCH_SHARDS: '2' }));
    try {
      const res = await fetch(`${app.url}/v1/projects/${projectId}/pause`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(res.status).toBe(500);
      expect(await res.json()).toMatchObject({
        error: expect.stringMatching(/^DISPATCH_SHARDS: is 2/),
        code: 'layout_mismatch',
        setting: 'DISPATCH_SHARDS',
      });
    } finally {
      await app.close();
    }
    for (let shard = 0; shard < SHARDS; shard++)
      expect(await ns().redis.exists(controlsIn(shard))).toBe(0);
  });
});
