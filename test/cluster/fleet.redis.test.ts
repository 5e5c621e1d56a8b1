import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEventReader, type CompletionEvent } from '../../src/dispatch/event-reader.js';
import { createProducer } from '../../src/producer/index.js';
import { connect } from '../../src/redis/connections.js';
import { shardLayout, shardOf } from '../../src/redis/keys.js';
import { runCliToEnd, type CliProcess } from '../support/cli.js';
import { arrivalTimes, busiestWindow } from '../support/deliveries.js';
import { duplicates } from '../support/events.js';
import { grid, roundsOf } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import {
  commandsPerNode,
  resetCommandStats,
  startLocalCluster,
  type LocalCluster,
} from '../support/redis-cluster.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { FAST_SETTINGS } from '../support/service.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

const SHARDS = 6;
const MASTERS = 3;

/**
 * `count` project ids spread evenly over the shards (at most ceil(count / SHARDS) each): which
 * shard a name hashes to is luck, and 20 names can land 10/4/6 on three masters; the test is about
 * the layout spreading what it is given, so it is given an even set of projects.
 */
function evenProjects(count: number, tag: string): string[] {
  const cap = Math.ceil(count / SHARDS);
  const perShard = new Array<number>(SHARDS).fill(0);
  const picked: string[] = [];
  for (let n = 0; picked.length < count; n++) {
    const id = `${tag}${n}`;
    const shard = shardOf(id, SHARDS);
    if ((perShard[shard] ?? 0) >= cap) continue;
    perShard[shard] = (perShard[shard] ?? 0) + 1;
    picked.push(id);
  }
  return picked;
}

describe('a fleet on a Redis Cluster of 3 masters, DISPATCH_SHARDS=6', () => {
  const simulator = useSimulator({ workTimeMs: 200, sendLimit: { max: 20, windowMs: 2_000 } });
  let cluster: LocalCluster;
  let redis: Redis;
  const prefix = `t-cluster-${randomBytes(4).toString('hex')}`;
  const processes: CliProcess[] = [];

  beforeAll(async () => {
    cluster = await startLocalCluster(MASTERS);
    redis = connect({ redisUrl: cluster.url, redisCluster: true }, 'worker', 'test');
  }, 60_000);
  afterAll(async () => {
    try {
      await stopAll(processes.splice(0));
    } finally {
      redis?.disconnect();
      await cluster?.destroy();
    }
  });

  const env = (settings: Record<string, string> = {}) => ({
    ...FAST_SETTINGS,
    REDIS_URL: cluster.url,
    REDIS_CLUSTER: 'true',
    REDIS_DURABILITY: 'none',
    DISPATCH_SHARDS: String(SHARDS),
    DISPATCH_PREFIX: prefix,
    EVENTS_STREAM: `${prefix}:events`,
    AGENT_API_URL: simulator().url,
    AGENT_API_KEY: TEST_API_KEY,
    STALLED_TIMEOUT: '3s',
    SEND_RATE_LIMIT: '20/2s',
    LOG_LEVEL: 'warn',
    ...settings,
  });
  const shards = () => shardLayout(prefix, `${prefix}:events`, SHARDS, true);
  const producerOf = () =>
    createProducer({
      redisUrl: cluster.url,
      prefix,
      shards: SHARDS,
      cluster: true,
      durability: { mode: 'none' },
    });

  it('delivers 400 follow-ups of 20 projects once each, in order, within budget, one event each, spread over the masters', async () => {
    const roles = [...startRoles('worker', 3, env()), ...startRoles('poller', 2, env())];
    processes.push(...roles);
    for (const shard of shards())
      await waitForWorkers({ redis, prefix: shard.prefix }, 3, { processes });
    await resetCommandStats(cluster);

    const projects = evenProjects(20, 'p');
    const inputs = grid(simulator(), 20, 4, 5).map((input) => ({
      ...input,
      projectId: projects[Number(input.projectId.slice(1))] ?? input.projectId,
    }));
    for (const p of projects) for (let j = 0; j < 4; j++) simulator().seedJob(p, `j${j}`);
    const producer = producerOf();
    const results = await producer.sendMany(inputs).finally(() => producer.close());

    const reader = createEventReader({
      redisUrl: cluster.url,
      prefix,
      eventsStream: `${prefix}:events`,
      shards: SHARDS,
      cluster: true,
      group: 'test',
      consumer: 'c1',
    });
    const read: CompletionEvent[] = [];
    try {
      await eventually(
        async () => {
          const batch = await reader.read({ count: 200, blockMs: 500 });
          await reader.ack(batch);
          read.push(...batch);
          return read.length >= inputs.length ? true : undefined;
        },
        {
          timeoutMs: 120_000,
          intervalMs: 10,
          what: `${inputs.length} events via createEventReader`,
        },
      );
      // Nothing more comes, and nothing is left pending in any shard's group.
      expect(await reader.read({ count: 10, blockMs: 1_000 })).toEqual([]);
    } finally {
      await reader.close();
    }
    const commands = await commandsPerNode(cluster);

    const deliveries = simulator().deliveries;
    expect(deliveries.map((d) => d.prompt).sort()).toEqual(inputs.map((i) => i.prompt).sort());
    expect(duplicates(deliveries.map((d) => d.prompt))).toEqual([]);
    for (const p of projects) {
      for (let j = 0; j < 4; j++) expect(roundsOf(deliveries, p, `j${j}`)).toEqual([1, 2, 3, 4, 5]);
      expect(busiestWindow(arrivalTimes(deliveries, p), 2_000)).toBeLessThanOrEqual(20);
    }
    const ids = new Set(results.map((r) => r.dispatchId));
    expect(read.map((e) => e.dispatchId).sort()).toEqual([...ids].sort());
    for (const e of read) expect(e.shard).toBe(shardOf(e.projectId, SHARDS));

    // The CLI reads every shard's stream as one: each follow-up's one event, in id order.
    const cli = await runCliToEnd(['events'], env());
    expect(cli.code).toBe(0);
    const printed = cli.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; dispatchId: string; type: string });
    expect(printed.map((e) => e.dispatchId).sort()).toEqual([...ids].sort());
    expect(new Set(printed.map((e) => e.type))).toEqual(new Set(['followup.completed']));

    const mean = commands.reduce((a, b) => a + b, 0) / commands.length;
    console.log(
      `commands per master during the run: ${commands.join(', ')} (mean ${Math.round(mean)}; ` +
        commands.map((c) => `${((c / mean - 1) * 100).toFixed(1)} %`).join(', ') +
        ')',
    );
    for (const c of commands) expect(Math.abs(c / mean - 1)).toBeLessThanOrEqual(0.25);

    await stopAll(processes.splice(0));
    // A CROSSSLOT anywhere (a role's log, the CLI) fails the test; the producer would have thrown.
    const logs = [cli, ...roles.map((r) => r.output)].map((o) => o.stdout + o.stderr).join('\n');
    expect(logs).not.toMatch(/CROSSSLOT/);
  }, 180_000);
});
