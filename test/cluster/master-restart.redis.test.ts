import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { QUEUE_NAMES, shardOf } from '../../src/redis/keys.js';
import { keySlot } from '../../src/redis/slot.js';
import type { Simulator } from '../../src/simulator/index.js';
import { useClusterFleet, type ClusterFleet } from '../support/cluster-fleet.js';
import { arrivalTimes, busiestWindow } from '../support/deliveries.js';
import { duplicates } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { nodeOfSlot } from '../support/redis-cluster.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';
import { whereIs } from '../support/where-is.js';

const MASTERS = 3;
const SHARDS = 6;
/** The master killed. */
const VICTIM = 1;

/** What a master's SIGKILL and restart cost: follow-ups enqueued before it that never ended. */
interface Loss {
  readonly onVictim: ReadonlySet<number>;
  readonly enqueued: number;
  readonly lost: { projectId: string; prompt: string; sent: boolean }[];
}

/** A follow-up of the test: what it was sent with, and the id it was given. */
interface Sent {
  readonly projectId: string;
  readonly prompt: string;
  readonly dispatchId: string;
}

/**
 * Where the follow-ups of `sent` that have no event are, and how each shard's poll queue stands,
 * for a timed-out wait to say what it waited on (`whereIs`); per shard, the poll queue's counts,
 * overdue ticks and schedulers.
 */
async function whereStuck(
  fleet: ClusterFleet,
  onVictim: ReadonlySet<number>,
  sent: readonly Sent[],
): Promise<string> {
  const { redis } = fleet;
  const ended = new Set((await fleet.promptEvents()).map((e) => e.prompt));
  const lines: string[] = [];
  for (const shard of fleet.shards()) {
    const poll = new Queue(QUEUE_NAMES.poll, { connection: redis, prefix: shard.prefix });
    const counts = await poll.getJobCounts('active', 'wait', 'delayed', 'failed');
    const overdue = (await poll.getDelayed()).filter((j) => j.timestamp + j.delay < Date.now());
    const schedulers = (await poll.getJobSchedulers()).length;
    await poll.close();
    lines.push(
      `shard ${shard.index}${onVictim.has(shard.index) ? ' (victim)' : ''}: poll queue ` +
        `${JSON.stringify(counts)}, ${overdue.length} overdue ticks, ${schedulers} schedulers`,
    );
  }
  for (const { projectId, prompt, dispatchId } of sent.filter((s) => !ended.has(s.prompt))) {
    const shard = fleet.shards()[shardOf(projectId, fleet.shardCount)];
    if (!shard) continue;
    const queue = new Queue(QUEUE_NAMES.dispatch, { connection: redis, prefix: shard.prefix });
    const where = await whereIs(redis, shard.prefix, dispatchId, (id) => queue.getJobState(id));
    await queue.close();
    lines.push(`${prompt} (shard ${shard.index}): ${where}`);
  }
  return lines.join('\n');
}

/**
 * 2 workers and a poller; 120 follow-ups of 12 projects; once a third have ended, master
 * {@link VICTIM} is SIGKILLed and restarted on its data folder; then a second batch. Checks what
 * must hold whatever the persistence: every shard of the other masters (every shard, when the
 * master `keptAll` its writes) ends all its follow-ups,
 * the roles reconnect by themselves (the second batch ends on every shard), nothing is sent or
 * published twice, no CROSSSLOT. Resolves to what was lost, for the caller to judge.
 */
async function killAndRestartMaster(
  fleet: ClusterFleet,
  simulator: Simulator,
  keptAll: boolean,
): Promise<Loss> {
  const { cluster, redis, processes } = fleet;
  // The repair sweep re-adds a BullMQ job lost with the connection that was adding or moving it.
  const env = fleet.env({ REPAIR_GRACE: '5s' });
  const roles = [...startRoles('worker', 2, env), ...startRoles('poller', 1, env)];
  processes.push(...roles);
  const onVictim = new Set<number>();
  for (const shard of fleet.shards()) {
    await waitForWorkers({ redis, prefix: shard.prefix }, 2, { processes });
    if ((await nodeOfSlot(cluster, keySlot(shard.prefix))) === VICTIM) onVictim.add(shard.index);
  }
  expect(onVictim.size).toBe(SHARDS / MASTERS);

  const projects = fleet.evenProjects(12, 'k');
  const batch = (round: string) =>
    projects.flatMap((p) =>
      [0, 1].flatMap((j) => {
        simulator.seedJob(p, `${round}${j}`);
        return [1, 2, 3, 4, 5].map((n) => {
          const prompt = `${p}/${round}${j} #${n}`;
          return { projectId: p, jobId: `${round}${j}`, prompt, meta: { prompt } };
        });
      }),
    );
  const sent: Sent[] = [];
  const send = async (inputs: ReturnType<typeof batch>) => {
    const results = await producer.sendMany(inputs);
    inputs.forEach((i, k) => sent.push({ ...i, dispatchId: results[k]?.dispatchId ?? '' }));
  };
  const endedAll = async (inputs: readonly { prompt: string }[], what: string) =>
    eventually(
      async () => {
        const events = await fleet.promptEvents();
        const ended = new Set(events.map((e) => e.prompt));
        return inputs.every((i) => ended.has(i.prompt)) ? events : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250, what },
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await whereStuck(fleet, onVictim, sent)}`, {
        cause: err,
      });
    });

  const before = batch('a');
  const producer = fleet.producer();
  try {
    await send(before);
    await eventually(
      async () => ((await fleet.promptEvents()).length >= before.length / 3 ? true : undefined),
      { timeoutMs: 60_000, what: 'a third of the events' },
    );
    const node = cluster.nodes[VICTIM];
    await node?.stop('SIGKILL');
    await new Promise((r) => setTimeout(r, 1_000));
    await node?.restart();
    await cluster.waitUntilOk();

    const survivors = keptAll
      ? before
      : before.filter((i) => !onVictim.has(shardOf(i.projectId, SHARDS)));
    await endedAll(survivors, 'the events of the other masters’ shards');
    // The roles reconnected by themselves: a new batch ends on every shard, the restarted
    // master's too (its poll scheduler is upserted again, its scripts loaded again).
    const after = batch('b');
    await send(after);
    const events = await endedAll(after, 'the events of the batch sent after the restart');

    const delivered = simulator.deliveries.map((d) => d.prompt);
    expect(duplicates(delivered)).toEqual([]);
    expect(duplicates(events.map((e) => e.prompt))).toEqual([]);
    for (const p of projects.filter((p) => !onVictim.has(shardOf(p, SHARDS))))
      expect(busiestWindow(arrivalTimes(simulator.deliveries, p), 2_000)).toBeLessThanOrEqual(20);
    const ended = new Set(events.map((e) => e.prompt));
    const lost = before
      .filter((i) => !ended.has(i.prompt))
      .map((i) => ({ ...i, sent: delivered.includes(i.prompt) }));
    return { onVictim, enqueued: before.length, lost };
  } finally {
    await producer.close();
    await stopAll(processes.splice(0));
    const logs = roles.map((r) => r.output.stdout + r.output.stderr).join('\n');
    expect(logs).not.toMatch(/CROSSSLOT/);
  }
}

function describeLoss({ onVictim, enqueued, lost }: Loss, how: string): string {
  return (
    `master ${VICTIM} (shards ${[...onVictim].join(', ')}) SIGKILLed and restarted, ${how}: ` +
    `${lost.length} of ${enqueued} follow-ups enqueued before ended with no event ` +
    `(${lost.filter((l) => l.sent).length} of those had been sent); none sent or published twice`
  );
}

describe('a master of the cluster killed mid-run, no replica, no persistence', () => {
  const simulator = useSimulator({ workTimeMs: 200, sendLimit: { max: 20, windowMs: 2_000 } });
  const fleet = useClusterFleet(simulator, { masters: MASTERS, shards: SHARDS });

  it('loses at most the follow-ups of that master’s shards; the others and the roles carry on', async () => {
    const loss = await killAndRestartMaster(fleet(), simulator(), false);
    console.log(describeLoss(loss, 'without its data'));
    // A master that comes back empty took its shards' records, lanes and events with it.
    expect(loss.lost.every((l) => loss.onVictim.has(shardOf(l.projectId, SHARDS)))).toBe(true);
  }, 240_000);
});

describe('a master of the cluster killed mid-run, AOF with appendfsync always', () => {
  const simulator = useSimulator({ workTimeMs: 200, sendLimit: { max: 20, windowMs: 2_000 } });
  const fleet = useClusterFleet(simulator, {
    masters: MASTERS,
    shards: SHARDS,
    persistence: { appendonly: 'yes', appendfsync: 'always' },
  });

  it('loses nothing: every follow-up ends with its one event', async () => {
    const loss = await killAndRestartMaster(fleet(), simulator(), true);
    console.log(describeLoss(loss, 'replaying its AOF'));
    expect(loss.lost).toEqual([]);
  }, 240_000);
});
