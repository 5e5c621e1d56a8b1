import { describe, expect, it } from 'vitest';
import type { CliProcess } from '../support/cli.js';
import { duplicates } from '../support/events.js';
import { fleetEnv, grid, useFleet } from '../support/fleet.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

describe('a fleet under interruptions', () => {
  const simulator = useSimulator({ workTimeMs: 200 });
  const fleet = useFleet('interrupt', simulator);

  it('parks only the project the API answered 429 for; the others keep flowing', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '100/10s' });
    fleet().processes = [...startRoles('worker', 2, env), ...startRoles('poller', 1, env)];
    await waitForWorkers(ns, 2);
    const limitedUntil = Date.now() + 10_000;
    simulator().rateLimitProject('hot0', limitedUntil);
    const hot = grid(simulator(), 1, 3, 2, 'hot');
    const others = grid(simulator(), 3, 4, 6, 'cool');
    await producer.sendMany([...hot, ...others]);

    await fleet().events(hot.length + others.length, 60_000);
    const deliveries = simulator().deliveries;
    const coolDuringLimit = deliveries.filter(
      (d) => d.projectId.startsWith('cool') && d.at < limitedUntil,
    );
    const hotDeliveries = deliveries.filter((d) => d.projectId === 'hot0');
    expect(coolDuringLimit.length).toBeGreaterThanOrEqual(others.length * 0.8);
    expect(hotDeliveries).toHaveLength(hot.length);
    expect(hotDeliveries.every((d) => d.at >= limitedUntil)).toBe(true);
    const refused = simulator().requests.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.every((r) => r.projectId === 'hot0')).toBe(true);
  }, 90_000);

  it('loses nothing and sends nothing twice when a worker is killed five times mid-run', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '1000/1s', ACTIVE_GRACE: '1s' });
    const pollers = startRoles('poller', 1, env);
    let worker = startRoles('worker', 1, env)[0] as CliProcess;
    fleet().processes = [...pollers, worker];
    const inputs = grid(simulator(), 5, 4, 10);
    const results = await producer.sendMany(inputs);
    for (let kill = 0; kill < 5; kill++) {
      await waitForWorkers(ns, 1);
      await new Promise((r) => setTimeout(r, 200 + Math.random() * 1_000));
      expect(await worker.stop('SIGKILL')).toBe('SIGKILL');
      worker = startRoles('worker', 1, env)[0] as CliProcess;
      fleet().processes = [...pollers, worker];
    }
    // The last one too must be up before the end: SIGTERMed while it still loads its modules (its
    // handler not yet installed), it would end by SIGTERM and the clean-exit check would fail.
    await waitForWorkers(ns, 1, { processes: [worker] });

    const events = await fleet().events(inputs.length);
    const deliveries = simulator().deliveries;
    expect(duplicates(deliveries.map((d) => d.prompt))).toEqual([]);
    expect(duplicates(events.map((e) => e.dispatchId))).toEqual([]);
    expect(new Set(events.map((e) => e.dispatchId))).toEqual(
      new Set(results.map((r) => r.dispatchId)),
    );
    const promptOf = new Map(results.map((r, i) => [r.dispatchId, inputs[i]?.prompt]));
    const delivered = new Set(deliveries.map((d) => d.prompt));
    for (const e of events.filter((e) => e.type === 'followup.completed')) {
      expect(delivered.has(promptOf.get(e.dispatchId) as string)).toBe(true);
    }
    const others = events
      .filter((e) => e.type !== 'followup.completed')
      .map((e) => `${e.type}:${String(e.event['reason'])}`);
    console.log(
      `killed 5 times: ${deliveries.length} of ${inputs.length} delivered; other endings: ${others.join(', ') || 'none'}`,
    );
  }, 150_000);
});
