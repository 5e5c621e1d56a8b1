import { describe, expect, it } from 'vitest';
import { NotCancellableError, type Admin, type Producer } from '../../src/producer/index.js';
import { adminOf } from '../support/admin.js';
import { arrivalTimes, busiestWindow } from '../support/deliveries.js';
import { duplicates } from '../support/events.js';
import { fleetEnv, grid, roundsOf, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

/**
 * The operator controls against a fleet of role processes: what the simulator received is the
 * judge, counted, never timed.
 */
describe('operator controls honoured by a fleet of processes', () => {
  const simulator = useSimulator({ workTimeMs: 100, sendLimit: { max: 1_000, windowMs: 2_000 } });
  const fleet = useFleet('controls-fleet', simulator);

  /** 3 workers and a poller in the fleet's namespace, up. */
  async function startFleet(settings: Record<string, string> = {}): Promise<void> {
    const { ns } = fleet();
    const env = fleetEnv(ns, simulator(), settings);
    const workers = startRoles('worker', 3, env);
    fleet().processes = [...workers, ...startRoles('poller', 1, env)];
    await waitForWorkers(ns, 3, { processes: workers });
  }

  /**
   * Starts the fleet (its roles at SEND_RATE_LIMIT `limit`, the default when unset) and runs
   * `test` with the fleet's producer and an admin of its namespace, closed after.
   */
  async function withFleet(
    test: (admin: Admin, producer: Producer) => Promise<void>,
    limit?: string,
  ): Promise<void> {
    const { ns, producer } = fleet();
    const admin = adminOf(ns, limit);
    try {
      await startFleet(limit === undefined ? {} : { SEND_RATE_LIMIT: limit });
      await test(admin, producer);
    } finally {
      await admin.close();
    }
  }

  it('a paused project receives nothing while the other four finish, then everything in order', async () => {
    await withFleet(async (admin, producer) => {
      await admin.pauseProject('p0');
      const inputs = grid(simulator(), 5, 2, 3);
      await producer.sendMany(inputs);
      const others = await fleet().events(24);
      expect(others.every((e) => e.projectId !== 'p0' && e.type === 'followup.completed')).toBe(
        true,
      );
      expect(simulator().deliveries.filter((d) => d.projectId === 'p0')).toEqual([]);
      const shown = await admin.showProject('p0');
      expect(shown).toMatchObject({ paused: true, queued: 6, sending: 0, sendsInWindow: 0 });

      expect((await admin.resumeProject('p0')).changed).toBe(true);
      const events = await fleet().events(30, 30_000);
      expect(events.filter((e) => e.projectId === 'p0')).toHaveLength(6);
      for (const job of ['j0', 'j1'])
        expect(roundsOf(simulator().deliveries, 'p0', job)).toEqual([1, 2, 3]);
      // Nothing spent while paused: each was sent on its first attempt.
      for (const e of events.filter((x) => x.projectId === 'p0'))
        expect(e.event['attempts']).toBe(1);
      expect(duplicates(simulator().deliveries.map((d) => d.prompt))).toEqual([]);
    });
  }, 120_000);

  it('a follow-up cancelled while queued is never received, ends once, and its lane goes on', async () => {
    await withFleet(async (admin, producer) => {
      simulator().seedJob('c', 'j');
      await admin.pauseProject('c');
      const [first, second, third] = await producer.sendMany(
        [1, 2, 3].map((n) => ({ projectId: 'c', jobId: 'j', prompt: `c/j #${n}` })),
      );
      await admin.cancel(first?.dispatchId ?? '');
      await admin.resumeProject('c');
      const events = await fleet().events(3);
      expect(events.map((e) => [e.dispatchId, e.type])).toEqual([
        [first?.dispatchId, 'followup.cancelled'],
        [second?.dispatchId, 'followup.completed'],
        [third?.dispatchId, 'followup.completed'],
      ]);
      expect(simulator().deliveries.map((d) => d.prompt)).toEqual(['c/j #2', 'c/j #3']);
    });
  }, 60_000);

  it('100 cancels racing the workers: one event each, none both cancelled and received', async () => {
    await withFleet(async (admin, producer) => {
      const inputs = grid(simulator(), 4, 25, 1, 'r');
      const results = await producer.sendMany(inputs);
      // Cancels in waves of 10 while the workers take the same follow-ups, so both sides win some.
      const answers: string[] = [];
      for (let i = 0; i < results.length; i += 10) {
        const wave = results.slice(i, i + 10).map((r) =>
          admin.cancel(r.dispatchId).then(
            () => 'cancelled',
            (err: unknown) => (err instanceof NotCancellableError ? err.state : String(err)),
          ),
        );
        answers.push(...(await Promise.all(wave)));
        await new Promise((r) => setTimeout(r, 20));
      }
      const events = await fleet().events(100);
      expect(events).toHaveLength(100);
      expect(duplicates(events.map((e) => e.dispatchId))).toEqual([]);
      const received = new Set(simulator().deliveries.map((d) => d.prompt));
      const cancelled = new Set(
        events.filter((e) => e.type === 'followup.cancelled').map((e) => e.dispatchId),
      );
      results.forEach((r, i) => {
        const prompt = inputs[i]?.prompt ?? '';
        // Cancelled exactly when the cancel said so, and then never received; otherwise sent.
        expect(cancelled.has(r.dispatchId)).toBe(answers[i] === 'cancelled');
        expect(received.has(prompt)).toBe(!cancelled.has(r.dispatchId));
        if (answers[i] !== 'cancelled') expect(['sending', 'sent', 'done']).toContain(answers[i]);
      });
      console.log(
        `100 cancels racing 3 workers: ${cancelled.size} cancelled, ${100 - cancelled.size} sent first`,
      );
    });
  }, 120_000);

  it('a 1/2s limit set mid-run holds in every 2-second window from then on; clearing it restores the default', async () => {
    const deliveries = () => simulator().deliveries.filter((d) => d.projectId === 'L');
    const countAtLeast = (n: number, what: string) =>
      eventually(() => (deliveries().length >= n ? true : undefined), { timeoutMs: 60_000, what });
    await withFleet(async (admin, producer) => {
      for (let j = 0; j < 30; j++) simulator().seedJob('L', `j${j}`);
      await producer.sendMany(
        Array.from({ length: 30 }, (_, j) => ({
          projectId: 'L',
          jobId: `j${j}`,
          prompt: `L #${j}`,
        })),
      );
      await countAtLeast(5, 'the first sends of L');
      // Tighter per 2 s than the default, but 1,800 an hour: looser than 100/1h, so forced.
      await admin.setProjectLimit('L', '1/2s', { force: true });
      // A send whose ACQUIRE came before the change may arrive shortly after it: SEND_TIMEOUT
      // (2 s) bounds that, so the windows are judged from then on.
      const judgedFrom = Date.now() + 2_000;
      const before = deliveries().length;
      await countAtLeast(before + 4, '4 sends of L under 1/2s');
      // Taken before the clear: the default holds from the moment its script runs, and the clear
      // wakes the follow-ups that held reserved slots before it resolves, so their sends (under
      // the default, rightly close to the last limited one) may arrive before it returns.
      const clearedAt = Date.now();
      await admin.clearProjectLimit('L');
      await fleet().events(30, 60_000);

      const times = arrivalTimes(simulator().deliveries, 'L');
      const limited = times.filter((t) => t > judgedFrom && t < clearedAt);
      expect(limited.length).toBeGreaterThanOrEqual(2);
      // Each 2-second window ending at a send under the limit holds that send only, counting
      // every send of L, those before the change included.
      for (const t of limited) expect(times.filter((u) => u > t - 2_000 && u <= t)).toEqual([t]);
      const afterClear = times.filter((t) => t > clearedAt + 2_000);
      expect(busiestWindow(afterClear, 2_000)).toBeGreaterThan(1);
      expect(busiestWindow(times, 2_000)).toBeLessThanOrEqual(5);
      expect(times).toHaveLength(30);
    }, '5/2s');
  }, 180_000);
});
