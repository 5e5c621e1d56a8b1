import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { fleetEnv } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { useSimulator } from '../support/simulator.js';
import { startEchoProxy, type EchoProxy } from './support/echo-proxy.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { useDrill } from './support/fixture.js';
import { waitForRole } from './support/quiet.js';
import { DRILL_SETTINGS } from './support/traffic.js';

const SEND_TIMEOUT_MS = 5_000;

/**
 * A poll tick used to await all of its status reads, each bounded by SEND_TIMEOUT only, so one
 * status read that never answered held up every other dispatch's event for SEND_TIMEOUT (30 s by
 * default), tick after tick (found by this drill: 5.2 s against 0.6 s with SEND_TIMEOUT 5s). The
 * poller now waits at most a second per read and lets a straggler finish on its own.
 */
describe('4. agent-API faults: a status read that never answers', () => {
  const simulator = useSimulator({ workTimeMs: 300 });
  let proxy: EchoProxy;
  beforeEach(async () => {
    proxy = await startEchoProxy(
      simulator().url,
      0,
      (method, path) => method === 'GET' && path.includes('/agent/stuck/'),
    );
  });
  afterEach(() => proxy.close());
  const drill = useDrill('f-hung', simulator);

  /** Milliseconds from enqueueing follow-ups to jobs `from`..`to` of `fine` to their events. */
  async function timeToEvents(from: number, to: number): Promise<number> {
    const { producer, probe } = drill();
    const started = Date.now();
    for (let j = from; j < to; j++)
      await producer.send({ projectId: 'fine', jobId: `j${j}`, prompt: `fine #${j}` });
    await eventually(
      async () => {
        const fine = (await probe.events()).filter((e) => e.projectId === 'fine');
        return fine.length >= to ? true : undefined;
      },
      { timeoutMs: 60_000, what: `${to} events of project fine` },
    );
    return Date.now() - started;
  }

  it('does not hold up the events of the other agent jobs', async (ctx) => {
    const watch = stopwatch();
    const { ns, producer, probe } = drill();
    const env = fleetEnv(ns, simulator(), {
      ...DRILL_SETTINGS,
      AGENT_API_URL: proxy.url,
      SEND_TIMEOUT: `${SEND_TIMEOUT_MS / 1000}s`,
    });
    drill().processes = [runCli(['worker'], env), runCli(['poller'], env)];
    await waitForRole(probe, 'dispatch', 1);
    simulator().seedJob('stuck', 'j0');
    for (let j = 0; j < 8; j++) simulator().seedJob('fine', `j${j}`);
    const baselineMs = await timeToEvents(0, 4);
    await producer.send({ projectId: 'stuck', jobId: 'j0', prompt: 'its status reads hang' });
    await eventually(() =>
      simulator().deliveries.some((d) => d.projectId === 'stuck') ? true : undefined,
    );
    const hungMs = await timeToEvents(4, 8);
    recordFigures(ctx, {
      category: 4,
      scenario: `one agent job whose status reads never answer, SEND_TIMEOUT ${SEND_TIMEOUT_MS / 1000}s; 4 follow-ups to other jobs before and 4 after`,
      tried: 9,
      faults: 'status reads of one job hang',
      lost: 0,
      duplicated: 0,
      leaked: 0,
      notes: [
        `events of the other jobs came ${baselineMs} ms after their enqueue without the hung read, ${hungMs} ms with it (SEND_TIMEOUT ${SEND_TIMEOUT_MS} ms)`,
      ],
      durationMs: watch(),
    });
    expect(hungMs).toBeLessThan(baselineMs + SEND_TIMEOUT_MS / 2);
  });
});
