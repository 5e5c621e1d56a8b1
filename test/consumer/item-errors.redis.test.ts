import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { logLines } from '../support/cli.js';
import { fleetEnv, grid, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

/**
 * One project whose stored limit no script can use, beside healthy ones, against a fleet of role
 * processes: the simulator's deliveries are the judge.
 */
describe('a project with a broken stored limit, beside healthy ones', () => {
  const simulator = useSimulator({ workTimeMs: 100, sendLimit: { max: 1_000, windowMs: 2_000 } });
  const fleet = useFleet('item-errors-fleet', simulator);

  it('the healthy ones are all delivered, none ambiguous; the broken one waits, then goes once repaired', async () => {
    const { ns, producer } = fleet();
    const at = keysFor(ns.prefix);
    // As `project limit evil 1/10000000000d` stores it, written straight into Redis: ACQUIRE's
    // PEXPIRE cannot take its window.
    await ns.redis.hset(at.projectControls('evil'), {
      limit: '1/10000000000d',
      max: 1,
      windowMs: 864_000_000_000_000_000,
      toleranceMs: 500,
    });
    const env = fleetEnv(ns, simulator());
    const workers = startRoles('worker', 2, env);
    fleet().processes = [...workers, ...startRoles('poller', 1, env)];
    await waitForWorkers(ns, 2, { processes: workers });
    // The broken project's follow-ups go in the same batches as the healthy ones'.
    const healthy = grid(simulator(), 6, 2, 2);
    const broken = grid(simulator(), 1, 2, 1, 'evil').map((f) => ({ ...f, projectId: 'evil' }));
    simulator().seedJob('evil', 'j0');
    simulator().seedJob('evil', 'j1');
    // Each broken one behind healthy ones of its batch: those before it in a call were written.
    const accepted = await producer.sendMany([
      ...healthy.slice(0, 6),
      broken[0]!,
      ...healthy.slice(6, 18),
      broken[1]!,
      ...healthy.slice(18),
    ]);

    const events = await fleet().events(healthy.length, 60_000);
    expect(events.map((e) => e.type)).toEqual(healthy.map(() => 'followup.completed'));
    expect(simulator().deliveries.filter((d) => d.projectId === 'evil')).toEqual([]);
    const lines = workers.flatMap((w) => logLines(w.output.stdout));
    const reported = lines.filter((l) => l['msg'] === 'store:item-error');
    expect(reported.length).toBeGreaterThan(0);
    expect(reported[0]).toMatchObject({
      level: 50,
      projectId: 'evil',
      op: 'acquire',
      key: at.projectControls('evil'),
    });
    // Waiting: neither sent nor ended.
    for (const index of [6, 19])
      expect((await producer.status(accepted[index]?.dispatchId ?? ''))?.state).toBe('queued');

    await ns.redis.del(at.projectControls('evil'));
    const all = await fleet().events(healthy.length + broken.length, 60_000);
    expect(all.filter((e) => e.projectId === 'evil').map((e) => e.type)).toEqual([
      'followup.completed',
      'followup.completed',
    ]);
    await eventually(() => (simulator().deliveries.length === all.length ? true : undefined));
  }, 120_000);
});
