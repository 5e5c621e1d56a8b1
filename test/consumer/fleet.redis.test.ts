import { describe, expect, it } from 'vitest';
import { duplicates } from '../support/events.js';
import { arrivalTimes, busiestWindow } from '../support/deliveries.js';
import { fleetEnv, grid, roundsOf, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

describe('a fleet of worker processes', () => {
  const simulator = useSimulator({ workTimeMs: 200, sendLimit: { max: 20, windowMs: 2_000 } });
  const fleet = useFleet('fleet', simulator);

  it('sends every prompt exactly once, in order per agent job, within 20 per 2 s per project', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '20/2s' });
    fleet().processes = [...startRoles('worker', 3, env), ...startRoles('poller', 1, env)];
    const inputs = grid(simulator(), 5, 4, 10);
    const results = await producer.sendMany(inputs);
    const events = await fleet().events(inputs.length);

    const deliveries = simulator().deliveries;
    expect(deliveries.map((d) => d.prompt).sort()).toEqual(inputs.map((i) => i.prompt).sort());
    expect(duplicates(deliveries.map((d) => d.prompt))).toEqual([]);
    for (let p = 0; p < 5; p++) {
      for (let j = 0; j < 4; j++)
        expect(roundsOf(deliveries, `p${p}`, `j${j}`)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(busiestWindow(arrivalTimes(deliveries, `p${p}`), 2_000)).toBeLessThanOrEqual(20);
    }
    expect(events).toHaveLength(200);
    expect(new Set(events.map((e) => e.dispatchId))).toEqual(
      new Set(results.map((r) => r.dispatchId)),
    );
    // Rejects unless all four exited 0.
    await stopAll(fleet().processes);
  }, 120_000);

  it('sends 20 light projects before a fifth of a 500 backlog of one project went out', async () => {
    const { ns, producer } = fleet();
    fleet().processes = startRoles(
      'worker',
      2,
      fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '20/2s' }),
    );
    await waitForWorkers(ns, 2);
    await producer.sendMany(grid(simulator(), 1, 50, 10, 'big'));
    const light = grid(simulator(), 20, 1, 1, 'light');
    const enqueuedAt = Date.now();
    await producer.sendMany(light);

    const delivered = await eventually(
      () => {
        const got = simulator().deliveries.filter((d) => d.projectId.startsWith('light'));
        return got.length === 20 ? got : undefined;
      },
      { timeoutMs: 30_000, what: '20 light deliveries' },
    );
    const lastLight = Math.max(...delivered.map((d) => d.at));
    // Fairness by count, not by the clock (a loaded machine slows both sides alike): without it
    // the light follow-ups would wait behind the big project's 500, budget-bound at 20 per 2 s.
    const bigBefore = arrivalTimes(simulator().deliveries, 'big0').filter((at) => at <= lastLight);
    console.log(
      `20 light projects behind a backlog of 500: all sent within ${lastLight - enqueuedAt} ms ` +
        `of their enqueue, while the big project had ${bigBefore.length} sends`,
    );
    expect(bigBefore.length).toBeLessThan(100);
    expect(busiestWindow(arrivalTimes(simulator().deliveries, 'big0'), 2_000)).toBeLessThanOrEqual(
      20,
    );
  }, 60_000);
});
