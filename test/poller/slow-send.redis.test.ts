import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { readEvents, waitForEvents } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';

/** Each send is answered this late; status reads stay quick. */
const SEND_LATENCY_MS = 1_500;
/** How long a run takes once the API accepted its prompt. */
const WORK_TIME_MS = 600;
const SETTINGS = { TRACK_TIMEOUT: '4s', SEND_TIMEOUT: '5s', CONNECT_TIMEOUT: '1s' } as const;
const TRACK_TIMEOUT_MS = 4_000;

describe('a send still in flight', () => {
  const { simulator, ns, start } = useService('slow-send', {
    workTimeMs: WORK_TIME_MS,
    faults: { sendLatencyMs: SEND_LATENCY_MS },
  });

  it('is never ended, even when its follow-up waited in the queue longer than TRACK_TIMEOUT', async () => {
    simulator().seedJob('p', 'j');
    // A poller from the start; no worker yet, so the follow-ups wait in the queue.
    const pollerOnly = start(SETTINGS, { worker: false });
    const [first, second] = await pollerOnly.producer.sendMany([
      { projectId: 'p', jobId: 'j', prompt: 'first' },
      { projectId: 'p', jobId: 'j', prompt: 'second' },
    ]);
    const firstId = first?.dispatchId as string;
    const secondId = second?.dispatchId as string;
    const record = keysFor(ns().prefix).dispatch(firstId);
    await eventually(
      async () => {
        const enqueuedAt = Number(await ns().redis.hget(record, 'enqueuedAt'));
        return Date.now() - enqueuedAt > TRACK_TIMEOUT_MS + 500 ? true : undefined;
      },
      { timeoutMs: TRACK_TIMEOUT_MS + 5_000, intervalMs: 100, what: 'TRACK_TIMEOUT to pass' },
    );
    expect(await readEvents(ns().redis, ns().eventsStream)).toEqual([]);

    start(SETTINGS, { poller: false });
    const events = await waitForEvents(ns().redis, ns().eventsStream, 2, 30_000);

    const endings = Object.fromEntries(
      events.map((e) => [e.dispatchId, `${e.type}:${String(e.event['reason'])}`]),
    );
    expect(endings).toEqual({
      [firstId]: 'followup.completed:null',
      [secondId]: 'followup.completed:null',
    });
    const deliveries = simulator().deliveries;
    expect(deliveries.map((d) => d.prompt)).toEqual(['first', 'second']);
    const [one, two] = deliveries;
    // The lane's next prompt went out only once the first run (active from its delivery for the
    // work time) was over.
    expect((two?.at ?? 0) - (one?.at ?? 0)).toBeGreaterThanOrEqual(WORK_TIME_MS);
  });
});
