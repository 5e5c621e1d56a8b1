import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { adminOf } from '../support/admin.js';
import { runCliToEnd } from '../support/cli.js';
import { waitForEvents } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';

/** `project unpark P`: clears a project's 429 park and wakes the follow-ups waiting it out. */
describe('unparking a project', () => {
  const { simulator, ns, start } = useService('unpark', { workTimeMs: 100 });

  it('clears the 429 park: the parked follow-up is sent at once, not at the park end', async () => {
    // SEND_RATE_LIMIT 100/1h: a 429 without Retry-After parks the project for 36 s.
    const service = start();
    simulator().seedJob('p1', 'j1');
    simulator().seedJob('p1', 'j2');
    simulator().rateLimitProject('p1', Date.now() + 1_000);
    const admin = adminOf(ns());
    try {
      const { dispatchId } = await service.producer.send({
        projectId: 'p1',
        jobId: 'j1',
        prompt: 'parked',
      });
      const park = keysFor(ns().prefix).park('p1');
      const parkedUntil = await eventually(
        async () => Number((await ns().redis.get(park)) ?? 0) || undefined,
        { what: 'the 429 park' },
      );
      expect(parkedUntil - Date.now()).toBeGreaterThan(20_000);
      // Another follow-up finds the project parked (ACQUIRE's `parked`) and waits it out too.
      const later = await service.producer.send({ projectId: 'p1', jobId: 'j2', prompt: 'later' });
      // Each job noted itself as waiting out the park before it was delayed.
      await eventually(
        async () =>
          (await ns().redis.scard(keysFor(ns().prefix).parkWaiters('p1'))) === 2 ? true : undefined,
        { what: 'the parked job noted' },
      );
      await new Promise((resolve) => setTimeout(resolve, 1_200)); // the API's own 429 is over
      const unparked = await admin.unparkProject('p1');
      expect(unparked).toEqual({
        projectId: 'p1',
        parkedUntil: new Date(parkedUntil).toISOString(),
        changed: true,
        woken: 2,
      });
      expect(await ns().redis.exists(park)).toBe(0);
      const startedAt = Date.now();
      const events = await waitForEvents(ns().redis, ns().eventsStream, 2, 15_000);
      expect(events.map((e) => [e.type, e.dispatchId]).sort()).toEqual(
        [
          ['followup.completed', dispatchId],
          ['followup.completed', later.dispatchId],
        ].sort(),
      );
      expect(Date.now() - startedAt).toBeLessThan(15_000);
      expect(
        simulator().requests.filter((r) => r.kind === 'send' && r.status === 200),
      ).toHaveLength(2);
      // Nothing parked any more: a second unpark changes nothing.
      expect(await admin.unparkProject('p1')).toEqual({
        projectId: 'p1',
        parkedUntil: null,
        changed: false,
        woken: 0,
      });
    } finally {
      await admin.close();
    }
  });

  it('is a command: project unpark P prints its answer', async () => {
    await ns().redis.set(keysFor(ns().prefix).park('p2'), String(Date.now() + 60_000));
    const result = await runCliToEnd(['project', 'unpark', 'p2'], ns().env());
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ projectId: 'p2', changed: true, woken: 0 });
    expect(await ns().redis.exists(keysFor(ns().prefix).park('p2'))).toBe(0);
    const usage = await runCliToEnd(['project', 'unpark', 'p2', 'extra'], ns().env());
    expect(usage.code).toBe(2);
  });
});
