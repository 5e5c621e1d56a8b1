import { describe, expect, it } from 'vitest';
import { createEventReader, type CompletionEvent } from '../../src/store/event-reader.js';
import { shardOf } from '../../src/redis/keys.js';
import { runCliToEnd } from '../support/cli.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { arrivalTimes, busiestWindow } from '../support/deliveries.js';
import { duplicates } from '../support/events.js';
import { grid, roundsOf } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { commandsPerNode, resetCommandStats } from '../support/redis-cluster.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

describe('a fleet on a Redis Cluster of 3 masters, DISPATCH_SHARDS=6', () => {
  const simulator = useSimulator({ workTimeMs: 200, sendLimit: { max: 20, windowMs: 2_000 } });
  const fleet = useClusterFleet(simulator, { masters: 3, shards: 6 });

  it('delivers 400 follow-ups of 20 projects once each, in order, within budget, one event each, spread over the masters', async () => {
    const { cluster, redis, env, processes } = fleet();
    const roles = [...startRoles('worker', 3, env()), ...startRoles('poller', 2, env())];
    processes.push(...roles);
    for (const shard of fleet().shards())
      await waitForWorkers({ redis, prefix: shard.prefix }, 3, { processes });
    await resetCommandStats(cluster);

    const projects = fleet().evenProjects(20, 'p');
    const inputs = grid(simulator(), 20, 4, 5).map((input) => ({
      ...input,
      projectId: projects[Number(input.projectId.slice(1))] ?? input.projectId,
    }));
    for (const p of projects) for (let j = 0; j < 4; j++) simulator().seedJob(p, `j${j}`);
    const producer = fleet().producer();
    const results = await producer.sendMany(inputs).finally(() => producer.close());

    const reader = createEventReader({
      redisUrl: cluster.url,
      prefix: fleet().prefix,
      eventsStream: `${fleet().prefix}:events`,
      shards: 6,
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
      // Nothing more comes: each event was delivered to the group once.
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
    const ids = [...new Set(results.map((r) => r.dispatchId))].sort();
    expect(ids).toHaveLength(inputs.length);
    expect(read.map((e) => e.dispatchId).sort()).toEqual(ids);
    for (const e of read) expect(e.shard).toBe(shardOf(e.projectId, 6));

    // The CLI reads every shard's stream as one: each follow-up's one event.
    const cli = await runCliToEnd(['events'], env());
    expect(cli.code).toBe(0);
    const printed = cli.stdout
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as {
            id: string;
            dispatchId: string;
            type: string;
            event: { reason: string | null };
          },
      );
    expect(printed.map((e) => e.dispatchId).sort()).toEqual(ids);
    expect(printed.map((e) => `${e.type} ${e.event.reason ?? ''}`.trim())).toEqual(
      printed.map(() => 'followup.completed'),
    );

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
