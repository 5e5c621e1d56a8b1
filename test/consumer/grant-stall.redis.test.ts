import { describe, expect, it } from 'vitest';
import { AgentApiClient, type CallOptions } from '../../src/agent-api/index.js';
import type { AgentJob } from '../../src/agent-api/index.js';
import { sleep } from '../../src/time/deadline.js';
import { arrivalTimes, busiestWindow } from '../support/deliveries.js';
import { waitForEvents } from '../support/events.js';
import { useService } from '../support/service.js';
import { TEST_API_KEY } from '../support/simulator.js';

/**
 * A worker that stalls between a send's budget grant and its write: the budget counts the send at
 * the grant, the API at its arrival. The simulator's arrival times are the judge.
 */
describe('a send stalled between its grant and its write', () => {
  // The simulator would answer 429 to a second send too soon and hide it: it counts, never limits.
  const service = useService('grant-stall', {
    workTimeMs: 50,
    sendLimit: { max: 1_000, windowMs: 2_000 },
  });

  /** The agent-API client of a worker that stalls `stallMs` before its first send is written. */
  class StallingClient extends AgentApiClient {
    #stalls = 1;
    constructor(
      url: string,
      readonly stallMs: number,
    ) {
      super({
        baseUrl: url,
        apiKey: TEST_API_KEY,
        connectTimeoutMs: 1_000,
        requestTimeoutMs: 2_000,
      });
    }
    override async sendMessage(
      projectId: string,
      jobId: string,
      prompt: string,
      options?: CallOptions,
    ): Promise<AgentJob> {
      // As a worker whose event loop or CPU stalled after ACQUIRE answered: the request leaves late.
      if (this.#stalls-- > 0) await sleep(this.stallMs);
      return super.sendMessage(projectId, jobId, prompt, options);
    }
  }

  it('no two arrivals closer than the limit: the stalled grant goes back and is acquired again', async () => {
    const simulator = service.simulator();
    simulator.seedJob('p', 'j0');
    simulator.seedJob('p', 'j1');
    const api = new StallingClient(simulator.url, 400);
    const { producer } = service.start(
      { SEND_RATE_LIMIT: '1/2s', WORKER_CONCURRENCY: '4' },
      { api },
    );
    await producer.sendMany([
      { projectId: 'p', jobId: 'j0', prompt: 'first' },
      { projectId: 'p', jobId: 'j1', prompt: 'second' },
    ]);
    const ns = service.ns();
    const events = await waitForEvents(ns.redis, ns.eventsStream, 2, 30_000);
    expect(events.map((e) => e.type)).toEqual(['followup.completed', 'followup.completed']);
    const times = arrivalTimes(simulator.deliveries, 'p');
    expect(times).toHaveLength(2);
    expect((times[1] ?? 0) - (times[0] ?? 0)).toBeGreaterThanOrEqual(2_000);
    expect(busiestWindow(times, 2_000)).toBe(1);
    // Given back, not spent: each was delivered on its first attempt.
    expect(events.map((e) => e.event['attempts'])).toEqual([1, 1]);
    await api.close();
  }, 60_000);
});
