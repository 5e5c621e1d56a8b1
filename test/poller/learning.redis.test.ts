import { describe, expect, it } from 'vitest';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { parseRunStats } from '../../src/store/run-history.js';
import { fleetEnv, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

describe("the poller and a project's run history", () => {
  const simulator = useSimulator({ workTimeMs: 4_000 });
  const fleet = useFleet('learning', simulator);

  it('tells the history of a run gone on past its window, then of its end', async () => {
    const { ns, producer } = fleet();
    // Twenty runs of 1 s ± 50 ms: with FAST_SETTINGS' reads the window ends at 1.2 s.
    const key = keysFor(ns.prefix).runs('p');
    await ns.redis.set(key, '20 1000.0 2500.0 0 0');
    const env = fleetEnv(ns, simulator(), { POLL_LEARN: 'true' });
    fleet().processes = [...startRoles('worker', 1, env), ...startRoles('poller', 1, env)];
    await waitForWorkers(ns, 1);
    await waitForWorkers(ns, 1, { queue: QUEUE_NAMES.poll });
    simulator().seedJob('p', 'j');
    await producer.send({ projectId: 'p', jobId: 'j', prompt: 'a long one' });
    // Past the window, still going: the history hears of it before the run ends.
    const runsNow = async () => parseRunStats(await ns.redis.get(key))?.runs;
    await eventually(async () => ((await runsNow()) === 21 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the run past its window in the history',
    });
    expect(await ns.redis.xlen(ns.eventsStream)).toBe(0);
    // Then the end, seen through the growing reads after the window: 4 s, told once more.
    await fleet().events(1);
    await eventually(async () => ((await runsNow()) === 22 ? true : undefined), {
      what: 'the run in the history',
      timeoutMs: 10_000,
    });
    const stats = parseRunStats(await ns.redis.get(key));
    expect(stats?.meanMs).toBeGreaterThan(1_500);
    expect(Math.sqrt(stats?.varMs2 ?? 0) / (stats?.meanMs ?? 1)).toBeGreaterThan(0.25);
  }, 60_000);
});
