import { createHash } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { LUA } from '../../src/store/lua.js';
import { runCli } from '../support/cli.js';
import { fleetEnv } from '../support/fleet.js';
import { useOpened } from '../support/hooks.js';
import { useSimulator } from '../support/simulator.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { useDrill } from './support/fixture.js';
import { waitForRole } from './support/quiet.js';
import { startReplyDroppingProxy } from './support/redis-proxy.js';
import { DRILL_SETTINGS, isAlive } from './support/traffic.js';

/**
 * ioredis resends a command whose reply a dropped connection lost (`autoResendUnfulfilledCommands`),
 * so a Lua script can run twice. ACQUIRE's second run used to find the dispatch `sending`, which
 * the consumer read as "a worker died mid-send", so a follow-up that was never sent ended
 * `undeliverable: ambiguous` (seen once in the Redis-restart drill: 534 deliveries for 535
 * follow-ups, one ambiguous). Each attempt now carries a token, and ACQUIRE answers `go` again to
 * the same token. Reproduced here by losing exactly that one reply; and the same for MARK_SENT,
 * whose second run must find its own state and change nothing.
 */
describe.each([
  ['ACQUIRE', LUA.acquire.source],
  ['MARK_SENT', LUA.markSent.source],
])('3. Redis restarts: the reply of %s lost with its connection', (name, script) => {
  const simulator = useSimulator({ workTimeMs: 300 });
  // ioredis sends a script as EVAL (its source) the first time on a connection, then EVALSHA.
  const sha = createHash('sha1').update(script).digest('hex');
  const opening = script.split('\n')[1]?.trim().slice(0, 40) ?? sha;
  // Every namespace lives on the shared test Redis: the proxy is opened before the drill's
  // namespace, and closed after its processes are killed.
  const proxy = useOpened('proxy', () =>
    startReplyDroppingProxy(inject('redisUrl'), [sha, opening]),
  );
  const drill = useDrill('f-lost-reply', simulator);

  it('still sends the follow-up, once', async (ctx) => {
    const watch = stopwatch();
    const { ns, producer, probe } = drill();
    const env = fleetEnv(ns, simulator(), { ...DRILL_SETTINGS, SEND_TIMEOUT: '1s' });
    const worker = runCli(['worker'], { ...env, REDIS_URL: proxy().url });
    drill().processes = [worker, runCli(['poller'], env)];
    await waitForRole(probe, 'dispatch', 1);
    simulator().seedJob('p', 'j');
    const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hello #0' });
    const { events } = await probe.settle(1, 30_000);
    const ending = events.map(
      (e) => `${e.type}${e.event['reason'] ? `:${String(e.event['reason'])}` : ''}`,
    );
    const delivered = simulator().deliveries.length;
    recordFigures(ctx, {
      category: 3,
      scenario: `one follow-up; the worker reaches Redis through a proxy that drops the reply of its first ${name} and cuts the connection`,
      tried: 1,
      faults: `1 reply lost (${proxy().dropped() ? 'dropped' : 'not dropped'})`,
      lost: delivered === 0 ? 1 : 0,
      duplicated: Math.max(0, delivered - 1),
      leaked: 0,
      notes: [
        `dispatch ${dispatchId} ended ${ending.join(', ') || 'without an event'}; the API received it ${delivered} time(s); worker alive: ${isAlive(worker.child)}`,
      ],
      durationMs: watch(),
    });
    // The precondition, on its own: the script ran in Redis and its reply never reached the worker.
    expect(proxy().dropped(), `precondition: the proxy dropped a reply of ${name}`).toBe(true);
    expect(ending).toEqual(['followup.completed']);
    expect(delivered).toBe(1);
    // The resent script spent no second attempt.
    expect(events[0]?.event).toMatchObject({ attempts: 1 });
  });
});
