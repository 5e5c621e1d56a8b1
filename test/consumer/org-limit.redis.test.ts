import { describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { shardOf } from '../../src/redis/keys.js';
import type { Delivery } from '../../src/simulator/index.js';
import { busiestWindow } from '../support/deliveries.js';
import { fleetEnv, grid, useFleet } from '../support/fleet.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

/** Arrival times of `deliveries` (the simulator's POSTs), ascending. */
const times = (deliveries: readonly Delivery[]) =>
  deliveries.map((d) => d.at).sort((a, b) => a - b);

/** Waits until the simulator received `count` POSTs, and returns them in arrival order. */
const delivered = (all: () => readonly Delivery[], count: number) =>
  eventually(() => (all().length >= count ? [...all()].sort((a, b) => a.at - b.at) : undefined), {
    timeoutMs: 60_000,
    what: `${count} deliveries`,
  });

describe('ORG_RATE_LIMIT over the fleet', () => {
  const simulator = useSimulator({ workTimeMs: 100 });
  const fleet = useFleet('org-limit', simulator);

  it('never sends more than 3 per 2 s across projects, and serves the light projects in turn with a big backlog', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '100/2s', ORG_RATE_LIMIT: '3/2s' });
    fleet().processes = startRoles('worker', 2, env);
    await waitForWorkers(ns, 2, { processes: fleet().processes });
    // The big project enqueues its 15 first: without turns, the light ones would come last.
    await producer.sendMany(grid(simulator(), 1, 15, 1, 'big'));
    await producer.sendMany(grid(simulator(), 2, 2, 1, 'light'));

    const all = await delivered(() => simulator().deliveries, 19);
    const busiest = busiestWindow(times(all), 2_000);
    const lightAt = all.flatMap((d, i) => (d.projectId.startsWith('light') ? [i + 1] : []));
    console.log(
      `ORG_RATE_LIMIT=3/2s, 3 projects (15 + 2 + 2): busiest 2 s window ${busiest} sends, ` +
        `light sends at positions ${lightAt.join(', ')} of 19, in ${all.at(-1)!.at - all[0]!.at} ms`,
    );
    expect(busiest).toBeLessThanOrEqual(3);
    // In turn: each light project's two among the first twelve sends, not the last four (16 to 19
    // without turns). Which of the first twelve depends on when a project's next follow-up wakes
    // after its previous send, a jittered park: 10 and 11 were both seen.
    expect(Math.max(...lightAt)).toBeLessThanOrEqual(12);
    for (const p of ['light0', 'light1', 'big0'])
      expect(all.slice(0, 6).some((d) => d.projectId === p)).toBe(true);
    await stopAll(fleet().processes);
  }, 90_000);

  it('off by default: the projects send at their own limit', async () => {
    const { ns, producer } = fleet();
    fleet().processes = startRoles(
      'worker',
      1,
      fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '100/2s' }),
    );
    await producer.sendMany(grid(simulator(), 3, 4, 1));
    const all = await delivered(() => simulator().deliveries, 12);
    expect(busiestWindow(times(all), 2_000)).toBe(12);
  }, 60_000);
});

describe('ORG_RATE_LIMIT with DISPATCH_SHARDS=2', () => {
  const SHARDS = 2;
  const simulator = useSimulator({ workTimeMs: 100 });
  const ns = useNamespace('org-shards', { shards: SHARDS, simulator });

  it('gives each shard half, and the fleet never sends more than the whole', async () => {
    const env = fleetEnv(ns(), simulator(), {
      SEND_RATE_LIMIT: '100/2s',
      ORG_RATE_LIMIT: '4/2s',
      DISPATCH_SHARDS: String(SHARDS),
    });
    const processes = startRoles('worker', 2, env);
    const producer = createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      eventsStream: ns().eventsStream,
      shards: SHARDS,
    });
    try {
      // Two projects in each shard, 5 sends each.
      const projects: string[] = [];
      for (let i = 0; projects.length < 4; i++) {
        const p = `s${i}`;
        if (projects.filter((q) => shardOf(q, SHARDS) === shardOf(p, SHARDS)).length < 2)
          projects.push(p);
      }
      const inputs = projects.flatMap((p) =>
        Array.from({ length: 5 }, (_, j) => {
          simulator().seedJob(p, `j${j}`);
          return { projectId: p, jobId: `j${j}`, prompt: `${p}/j${j}` };
        }),
      );
      await producer.sendMany(inputs);
      const all = await delivered(() => simulator().deliveries, 20);
      const busiest = busiestWindow(times(all), 2_000);
      const perShard = [0, 1].map((s) =>
        busiestWindow(times(all.filter((d) => shardOf(d.projectId, SHARDS) === s)), 2_000),
      );
      console.log(
        `ORG_RATE_LIMIT=4/2s over 2 shards: busiest 2 s window ${busiest} sends fleet-wide, ` +
          `${perShard.join(' and ')} per shard, 20 sends in ${all.at(-1)!.at - all[0]!.at} ms`,
      );
      expect(busiest).toBeLessThanOrEqual(4);
      expect(perShard.every((n) => n <= 2)).toBe(true);
      await stopAll(processes);
    } finally {
      await producer.close();
    }
  }, 90_000);
});
