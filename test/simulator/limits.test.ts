import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Simulator, SimulatorOptions } from '../../src/simulator/index.js';
import { eventually } from '../support/namespace.js';
import { startTestSimulator } from '../support/simulator.js';
import { closeRaw, get, send } from './raw-http.js';

/** The per-project send limit: a sliding window over accepted sends, and forced 429s. */

const open: Simulator[] = [];

async function simulator(options: Partial<SimulatorOptions> = {}): Promise<Simulator> {
  const sim = await startTestSimulator({ workTimeMs: 60_000, ...options });
  open.push(sim);
  return sim;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((sim) => sim.close()));
});
afterAll(() => closeRaw());

/** Waits until the wall clock passes `at`. */
function until(at: number): Promise<true> {
  return eventually(() => (Date.now() > at ? true : undefined), { intervalMs: 5 });
}

describe('sliding send window', () => {
  it('answers 429 JSON over the limit, counting only accepted sends', async () => {
    const sim = await simulator({ sendLimit: { max: 2, windowMs: 60_000 } });
    sim.seedJob('p', 'j');
    sim.seedJob('q', 'k');
    const statuses: number[] = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await send(sim.url, 'p', 'j', `m${i}`)).status);
    expect(statuses).toEqual([200, 200, 429, 429]);
    const limited = await send(sim.url, 'p', 'j', 'again');
    expect(limited).toMatchObject({
      contentType: 'application/json',
      json: { error: expect.stringMatching(/2 sends per project per 1m/) },
    });
    expect(limited.headers['retry-after']).toBeUndefined();
    expect((await send(sim.url, 'q', 'k', 'other project')).status).toBe(200);
    expect((await get(sim.url, 'p', 'j')).status).toBe(200);
    expect(sim.deliveries.map((d) => d.prompt)).toEqual(['m0', 'm1', 'other project']);
  });

  it('slides: a send frees its slot exactly one window after it was accepted', async () => {
    const windowMs = 2_000;
    const sim = await simulator({ sendLimit: { max: 3, windowMs } });
    sim.seedJob('p', 'j');
    await send(sim.url, 'p', 'j', 'a');
    await send(sim.url, 'p', 'j', 'b');
    const firstAt = sim.requests[0]!.at;
    await until(firstAt + windowMs / 2);
    expect((await send(sim.url, 'p', 'j', 'c')).status).toBe(200);
    const thirdAt = sim.requests[2]!.at;
    expect((await send(sim.url, 'p', 'j', 'over')).status).toBe(429);

    await until(sim.requests[1]!.at + windowMs);
    // A fixed window starting at the first send would now allow three; a sliding one allows two.
    const statuses: number[] = [];
    for (const prompt of ['d', 'e', 'f'])
      statuses.push((await send(sim.url, 'p', 'j', prompt)).status);
    expect(Date.now()).toBeLessThan(thirdAt + windowMs);
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('carries Retry-After (seconds, rounded up) and plain text when the faults ask', async () => {
    const sim = await simulator({
      sendLimit: { max: 1, windowMs: 10_000 },
      faults: { retryAfter: true, plainText429: true },
    });
    sim.seedJob('p', 'j');
    await send(sim.url, 'p', 'j', 'a');
    const limited = await send(sim.url, 'p', 'j', 'b');
    expect(limited).toMatchObject({
      status: 429,
      contentType: expect.stringMatching(/^text\/plain/),
    });
    expect(limited.text).toMatch(/rate limit exceeded/);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(9);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(10);
  });
});

describe('rateLimitProject', () => {
  it('answers 429 to every send of that project until the given time, then accepts', async () => {
    const sim = await simulator();
    sim.seedJob('p', 'j');
    sim.seedJob('q', 'k');
    const until = Date.now() + 400;
    sim.rateLimitProject('p', until, { retryAfter: true, plainText: true });
    const limited = await send(sim.url, 'p', 'j', 'a');
    expect(limited).toMatchObject({ status: 429, text: 'rate limit exceeded for this project' });
    expect(limited.headers['retry-after']).toBe('1');
    expect((await send(sim.url, 'q', 'k', 'b')).status).toBe(200);
    expect((await get(sim.url, 'p', 'j')).status).toBe(200);
    const accepted = await eventually(
      async () => {
        const answer = await send(sim.url, 'p', 'j', 'c');
        return answer.status === 200 ? Date.now() : undefined;
      },
      { intervalMs: 50 },
    );
    expect(accepted).toBeGreaterThanOrEqual(until);
    expect(sim.deliveries.map((d) => d.prompt)).toEqual(['b', 'c']);
  });

  it('follows the current faults for the body and header unless told', async () => {
    const sim = await simulator({ faults: { retryAfter: false, plainText429: false } });
    sim.seedJob('p', 'j');
    sim.rateLimitProject('p', Date.now() + 60_000);
    const limited = await send(sim.url, 'p', 'j', 'a');
    expect(limited).toMatchObject({
      status: 429,
      json: { error: 'rate limit exceeded for this project' },
    });
    expect(limited.headers['retry-after']).toBeUndefined();
  });
});
