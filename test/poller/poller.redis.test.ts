import { beforeEach, describe, expect, it } from 'vitest';
import type { RunEnding } from '../../src/simulator/index.js';
import type { CliProcess } from '../support/cli.js';
import { duplicates, type StreamEvent } from '../support/events.js';
import { fleetEnv, grid, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

const OUTCOMES: readonly RunEnding[] = ['completed', 'completed_no_pr', 'failed', 'archived'];
/** The outcome of a prompt `.../jN #n`: fixed by the round number, so the test knows it. */
const outcomeOf = (prompt: string): RunEnding =>
  OUTCOMES[Number(prompt.split('#')[1]) % OUTCOMES.length] as RunEnding;
const TYPE_OF: Record<RunEnding, string> = {
  completed: 'followup.completed',
  completed_no_pr: 'followup.completed',
  failed: 'followup.failed',
  archived: 'followup.archived',
};

describe('the poller', () => {
  const simulator = useSimulator({
    workTimeMs: () => 100 + Math.floor(Math.random() * 500),
    outcome: (_project, _job, prompt) => outcomeOf(prompt),
    sendLimit: { max: 10_000, windowMs: 1_000 },
  });
  const fleet = useFleet('poller', simulator);
  beforeEach(() => simulator().setStaleTerminalMs(0));

  it('publishes exactly one event per follow-up, with its type, status, prLink and meta', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '10000/1s' });
    fleet().processes = [...startRoles('worker', 1, env), ...startRoles('poller', 2, env)];
    const inputs = grid(simulator(), 10, 5, 4).map((input, i) => ({ ...input, meta: { i } }));
    const results = await producer.sendMany(inputs);
    const events = await fleet().events(inputs.length);

    expect(events).toHaveLength(200);
    expect(duplicates(events.map((e) => e.dispatchId))).toEqual([]);
    for (const [i, { dispatchId }] of results.entries()) {
      const event = events.find((e) => e.dispatchId === dispatchId) as StreamEvent;
      const outcome = outcomeOf(inputs[i]?.prompt as string);
      expect(event.type).toBe(TYPE_OF[outcome]);
      expect(event.status).toBe(outcome === 'completed_no_pr' ? 'completed' : outcome);
      if (outcome === 'completed')
        expect(event.prLink).toMatch(/^https:\/\/github\.com\/.+\/pull\/\d+$/);
      else expect(event.prLink).toBe('');
      expect(event.v).toBe('1');
      expect(event.event).toMatchObject({
        dispatchId,
        meta: { i },
        attempts: 1,
        projectId: inputs[i]?.projectId,
      });
      expect((event.event['job'] as { status: string }).status).toBe(event.status);
    }
  }, 120_000);

  it("waits out the previous run's stale terminal status and reports the new run", async () => {
    simulator().setStaleTerminalMs(1_500);
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { ACTIVE_GRACE: '5s' });
    fleet().processes = [...startRoles('worker', 1, env), ...startRoles('poller', 1, env)];
    simulator().seedJob('stale', 'j0', { status: 'failed' });
    const { dispatchId } = await producer.send({
      projectId: 'stale',
      jobId: 'j0',
      prompt: 'stale #1',
    });
    const [event] = await fleet().events(1);

    const [delivery] = simulator().deliveries;
    const runEndedAt = (delivery?.at as number) + 1_500 + 100;
    expect(event?.dispatchId).toBe(dispatchId);
    expect(event?.type).toBe(TYPE_OF[outcomeOf('stale #1')]);
    expect(Date.parse(event?.event['finishedAt'] as string)).toBeGreaterThanOrEqual(runEndedAt);
  }, 60_000);

  it('misses no event and repeats none when a poller is killed three times during ticks', async () => {
    const { ns, producer } = fleet();
    const env = fleetEnv(ns, simulator(), { SEND_RATE_LIMIT: '10000/1s' });
    const workers = startRoles('worker', 1, env);
    let poller = startRoles('poller', 1, env)[0] as CliProcess;
    fleet().processes = [...workers, poller];
    await waitForWorkers(ns, 1);
    const inputs = grid(simulator(), 5, 10, 4);
    const results = await producer.sendMany(inputs);
    for (let kill = 0; kill < 3; kill++) {
      await eventually(
        async () => ((await ns.redis.xlen(ns.eventsStream)) > (kill + 1) * 30 ? true : undefined),
        {
          timeoutMs: 60_000,
          what: 'events flowing',
        },
      );
      expect(await poller.stop('SIGKILL')).toBe('SIGKILL');
      poller = startRoles('poller', 1, env)[0] as CliProcess;
      fleet().processes = [...workers, poller];
    }
    const events = await fleet().events(inputs.length);
    expect(events).toHaveLength(inputs.length);
    expect(duplicates(events.map((e) => e.dispatchId))).toEqual([]);
    expect(new Set(events.map((e) => e.dispatchId))).toEqual(
      new Set(results.map((r) => r.dispatchId)),
    );
  }, 150_000);
});
