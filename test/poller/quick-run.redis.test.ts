import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { fleetEnv, useFleet } from '../support/fleet.js';
import { startRoles } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

/**
 * A run shorter than a poll tick: the job shows the previous run's `completed` for 500 ms after
 * the send, is `active` for 1 s, and ends 1.5 s after the send. With the default schedule
 * (POLL_INTERVAL 5s, POLL_MIN_INTERVAL 500ms, ACTIVE_GRACE 2m) the poller must read it while it is
 * active: the tick reads what falls due between ticks, so its first reads come when they are due,
 * not 5 s later when the run is over (then only ACTIVE_GRACE, 2 minutes on, would end it).
 */
describe('a run that ends before the next poll tick', () => {
  const simulator = useSimulator({ workTimeMs: 1_000, staleTerminalMs: 500 });
  const fleet = useFleet('quick-run', simulator);

  it('is seen active, so its event does not wait for ACTIVE_GRACE', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), {
      POLL_INTERVAL: '5s',
      POLL_MIN_INTERVAL: '500ms',
      POLL_MAX_INTERVAL: '1m',
      ACTIVE_GRACE: '2m',
    });
    fleet().processes = [...startRoles('worker', 1, env), ...startRoles('poller', 1, env)];
    simulator().seedJob('quick', 'j0', { status: 'completed' });
    const { dispatchId } = await producer.send({ projectId: 'quick', jobId: 'j0', prompt: 'go' });
    // Well short of ACTIVE_GRACE: an event only by the grace would not come in time.
    const [event] = await fleet().events(1, 60_000);

    expect(event?.dispatchId).toBe(dispatchId);
    expect(event?.type).toBe('followup.completed');
    const record = keysFor(ns.prefix).dispatch(dispatchId);
    expect(await ns.redis.hget(record, 'seenActive')).toBe('1');
    // The early reads cost a few GETs, not one per POLL_MIN_INTERVAL of the grace.
    expect(simulator().countGets('quick', 'j0')).toBeLessThanOrEqual(6);
  }, 120_000);
});
