import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DispatchStore } from '../../src/store/store.js';
import { createProducer, IdempotencyConflictError } from '../../src/producer/index.js';
import type { Producer } from '../../src/producer/index.js';
import { CLAIM_REPAIR_AGE_MS } from '../../src/producer/claims.js';
import { claimShardOf, keysFor, shardLayout, shardOf } from '../../src/redis/keys.js';
import { newDispatchId } from '../../src/store/register.js';
import { duplicates, readEvents } from '../support/events.js';
import { useOpened } from '../support/hooks.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { startService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';
import { runScript } from '../support/cli.js';

const SHARDS = 4;
/** Keys raced per test: enough that, without one claim per key, some race is always lost. */
const KEYS = 40;

/** Two projects of different shards. */
function projectsOfTwoShards(): [string, string] {
  const first = 'race-a';
  for (let i = 0; ; i++) {
    const other = `race-b${i}`;
    if (shardOf(other, SHARDS) !== shardOf(first, SHARDS)) return [first, other];
  }
}

describe('one idempotency key, one follow-up, across shards (DISPATCH_SHARDS=4)', () => {
  const simulator = useSimulator();
  const ns = useNamespace('idem-shards', { shards: SHARDS, simulator });
  /** Producers of their own connections, as separate processes would be. */
  const open = () =>
    createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      eventsStream: ns().eventsStream,
      shards: SHARDS,
      durability: { mode: 'none' },
    });
  const first = useOpened('first producer', open);
  const second = useOpened('second producer', open);
  const layout = () => shardLayout(ns().prefix, ns().eventsStream, SHARDS, false);
  const keysOf = (shard: number) => keysFor(layout()[shard]?.prefix ?? '');
  /** The shards that hold a record of `dispatchId`. */
  const holders = async (dispatchId: string) => {
    const found = await Promise.all(
      layout().map((s) => ns().redis.exists(keysFor(s.prefix).dispatch(dispatchId))),
    );
    return layout()
      .filter((_, i) => found[i] === 1)
      .map((s) => s.index);
  };
  /** What one send answered: accepted (new or deduplicated), or a conflict. */
  const outcome = (producer: Producer, projectId: string, key: string) =>
    // An agent job per key: follow-ups to one job would be sent one run after the other.
    producer.send({ projectId, jobId: key, prompt: `for ${projectId}`, key }).then(
      (r) => (r.deduplicated ? 'deduplicated' : 'accepted'),
      (err: unknown) => {
        if (err instanceof IdempotencyConflictError) return 'conflict';
        throw err;
      },
    );
  /** Every key sent at once by both producers, one for each project; the answers per key. */
  const race = (keys: readonly string[], [a, b]: readonly [string, string]) =>
    Promise.all(
      keys.map((key) => Promise.all([outcome(first(), a, key), outcome(second(), b, key)])),
    );
  /** A shard's store, as a producer's or a worker's. */
  const storeOf = (shard: number) =>
    new DispatchStore(ns().redis, keysOf(shard), {
      eventsStream: layout()[shard]?.eventsStream ?? '',
      eventsMaxLen: 1000,
      retentionMs: 60_000,
    });
  /** The claim of `key`'s dispatch id, where every producer looks for it. */
  const claimOf = (key: string) =>
    keysOf(claimShardOf(newDispatchId(key), SHARDS)).idempotencyClaim(newDispatchId(key));
  /** Claims `key` for `projectId`'s shard as a producer would that then died before its MULTI. */
  const claimAndDie = async (key: string, projectId: string, token: string) => {
    const dispatchId = newDispatchId(key);
    const [answer] = await storeOf(claimShardOf(dispatchId, SHARDS)).claims.claim([
      { dispatchId, shard: shardOf(projectId, SHARDS), token },
    ]);
    expect(answer?.kind).toBe('claimed');
  };
  /** Fences a claim in `shard` as a releaser would that then died before replacing it. */
  const fenceIn = async (shard: number, dispatchId: string, token: string) => {
    expect(await storeOf(shard).claims.fence([{ dispatchId, token }])).toEqual([true]);
  };
  /** Makes a claim look older than the repair age, instead of waiting that long. */
  const age = (key: string) =>
    ns().redis.hset(claimOf(key), 'at', Date.now() - CLAIM_REPAIR_AGE_MS - 1_000);

  it('accepts each key once when two producers send it at the same moment for projects of two shards', async () => {
    const projects = projectsOfTwoShards();
    expect(shardOf(projects[0], SHARDS)).not.toBe(shardOf(projects[1], SHARDS));
    const keys = Array.from({ length: KEYS }, (_, i) => `race-${i}`);
    const answers = await race(keys, projects);
    const twice = keys.filter((_, i) => answers[i]?.every((o) => o === 'accepted'));
    expect(twice, 'keys accepted by both producers').toEqual([]);
    for (const [i, key] of keys.entries()) {
      expect([...(answers[i] ?? [])].sort(), key).toEqual(['accepted', 'conflict']);
      expect(await holders(newDispatchId(key)), key).toHaveLength(1);
    }
  });

  it('sends each raced key once, with one event', async () => {
    const projects = projectsOfTwoShards();
    const keys = Array.from({ length: KEYS }, (_, i) => `sent-${i}`);
    for (const p of projects) for (const key of keys) simulator().seedJob(p, key);
    const answers = (await race(keys, projects)).flat();
    const accepted = answers.filter((a) => a === 'accepted').length;
    const service = startService(ns(), simulator(), { DISPATCH_SHARDS: String(SHARDS) });
    try {
      // One event per accepted follow-up (every one of them ends): then look at what was sent.
      const events = await eventually(async () => {
        const all = (
          await Promise.all(layout().map((s) => readEvents(ns().redis, s.eventsStream)))
        ).flat();
        return all.length >= accepted ? all : undefined;
      });
      const sent = simulator().deliveries.filter((d) => projects.includes(d.projectId));
      expect({ accepted, events: events.length, posts: sent.length }).toEqual({
        accepted: KEYS,
        events: KEYS,
        posts: KEYS,
      });
      expect(duplicates(events.map((e) => e.dispatchId))).toEqual([]);
      expect(events.map((e) => e.dispatchId).sort()).toEqual(keys.map(newDispatchId).sort());
      expect(events.map((e) => e.type)).toEqual(events.map(() => 'followup.completed'));
    } finally {
      await service.close();
    }
  });

  it("completes a claim left without its record by the next send for the same project, and refuses another project's while it is young", async () => {
    const [a, b] = projectsOfTwoShards();
    await claimAndDie('left-1', a, 'dead-producer');
    expect(await outcome(second(), b, 'left-1')).toBe('conflict');
    expect(await holders(newDispatchId('left-1'))).toEqual([]);
    expect(await outcome(first(), a, 'left-1')).toBe('accepted');
    expect(await holders(newDispatchId('left-1'))).toEqual([shardOf(a, SHARDS)]);
    // Complete, it stays a conflict for another project however old its claim.
    await age('left-1');
    expect(await outcome(second(), b, 'left-1')).toBe('conflict');
    expect(await holders(newDispatchId('left-1'))).toEqual([shardOf(a, SHARDS)]);
  });

  it('releases a claim left without its record once it is old, and refuses its late REGISTER', async () => {
    const [a, b] = projectsOfTwoShards();
    await claimAndDie('left-2', a, 'stalled-producer');
    await age('left-2');
    expect(await outcome(second(), b, 'left-2')).toBe('accepted');
    const dispatchId = newDispatchId('left-2');
    expect(await holders(dispatchId)).toEqual([shardOf(b, SHARDS)]);
    expect(await ns().redis.hget(claimOf('left-2'), 'shard')).toBe(String(shardOf(b, SHARDS)));

    // The stalled producer's MULTI arrives now, under the released claim's token: refused.
    const shardA = shardOf(a, SHARDS);
    const store = storeOf(shardA);
    const multi = ns().redis.multi();
    const followUp = {
      projectId: a,
      jobId: 'left-2',
      prompt: 'late',
      key: 'left-2',
      meta: undefined,
    };
    const { loads } = store.register.into(
      multi,
      [dispatchId],
      [{ ...followUp, claimToken: 'stalled-producer' }],
    );
    const replies = await multi.exec();
    expect(replies?.[loads]).toEqual([null, [-2]]);
    expect(await holders(dispatchId)).toEqual([shardOf(b, SHARDS)]);
    // Its BullMQ job, added in the same MULTI, will find no record and publish nothing.
    expect(await ns().redis.exists(keysOf(shardA).orphan(dispatchId))).toBe(1);
    // Its producer's retry is then a plain conflict.
    expect(await outcome(first(), a, 'left-2')).toBe('conflict');
  });

  it('replaces a claim fenced by a send that died before replacing it: the next retry registers', async () => {
    const [a] = projectsOfTwoShards();
    await claimAndDie('left-3', a, 'dead-producer');
    const dispatchId = newDispatchId('left-3');
    const shardA = shardOf(a, SHARDS);
    await fenceIn(shardA, dispatchId, 'dead-producer');

    // The producer replaces the claim and registers again at once: the caller sees no failure.
    const send = () => first().send({ projectId: a, jobId: 'left-3', prompt: 'p', key: 'left-3' });
    await expect(send()).resolves.toEqual({ dispatchId, deduplicated: false });
    expect(await holders(dispatchId)).toEqual([shardA]);
    await expect(send()).resolves.toEqual({ dispatchId, deduplicated: true });
  });

  it('answers a whole batch in which a claim was found released: its committed items are not failed, so not enqueued twice', async () => {
    const [a] = projectsOfTwoShards();
    const shardA = shardOf(a, SHARDS);
    await claimAndDie('left-4', a, 'dead-producer');
    const dispatchId = newDispatchId('left-4');
    await fenceIn(shardA, dispatchId, 'dead-producer');
    const batch = [
      { projectId: a, jobId: 'left-4', prompt: 'p', key: 'left-4' },
      { projectId: a, jobId: 'no-key', prompt: 'without a key' },
    ];
    // Before: RedisUnavailableError for the batch, its item without a key already enqueued, and
    // enqueued again by the retry the error asks for.
    const results = await first().sendMany(batch);
    expect(results).toEqual([
      { dispatchId, deduplicated: false },
      { dispatchId: expect.any(String), deduplicated: false },
    ]);
    const unkeyed = results[1]?.dispatchId ?? '';
    expect(await holders(dispatchId)).toEqual([shardA]);
    expect(await holders(unkeyed)).toEqual([shardA]);
    expect(await ns().redis.hlen(keysOf(shardA).laneHeads(a))).toBe(2);
  });

  it('a producer process killed in the middle of its sends: each key still ends in one shard, with its job', async () => {
    const [a, b] = projectsOfTwoShards();
    const script = fileURLToPath(new URL('support/keyed-sender.ts', import.meta.url));
    const env = { ...ns().env(), DISPATCH_SHARDS: String(SHARDS), PROJECT: a, KEYS: '200' };
    const sender = runScript(script, [], env);
    const printed = () => sender.output.stdout.split('\n').filter(Boolean);
    // Killed as soon as it has had a few keys accepted: the next send is in flight.
    await eventually(async () => (printed().length >= 12 ? true : undefined));
    expect(await sender.stop('SIGKILL')).toBe('SIGKILL');
    const accepted = printed();
    // Every key it may have touched, one past the last it printed (the send in flight) too.
    const keys = Array.from({ length: accepted.length + 2 }, (_, i) => `killed-${i}`);
    for (const key of keys) await age(key);
    for (const key of keys) {
      const dispatchId = newDispatchId(key);
      const before = await holders(dispatchId);
      const answer = await outcome(second(), b, key);
      const after = await holders(dispatchId);
      // A record of the killed process keeps the key; with none, the other project gets it.
      const kept = accepted.includes(key) || before.length > 0;
      const expected = kept ? { answer: 'conflict', after: before } : { answer: 'accepted' };
      expect({ key, answer, after }).toEqual({ key, after: [shardOf(b, SHARDS)], ...expected });
      if (!kept) expect(await outcome(first(), a, key), key).toBe('conflict');
      const shard = after[0] ?? -1;
      expect(await ns().redis.exists(keysOf(shard).dispatchQueue(dispatchId)), key).toBe(1);
    }
  });
});
