import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Faults, Simulator } from '../../src/simulator/index.js';
import { startTestSimulator } from '../support/simulator.js';
import { closeRaw, get, send } from './raw-http.js';

/** Every injected fault, seen from a plain HTTP client, and what the simulator records for it. */

let sim: Simulator | undefined;

async function withFaults(faults: Partial<Faults>, random?: () => number): Promise<Simulator> {
  sim = await startTestSimulator({ workTimeMs: 60_000, faults, ...(random ? { random } : {}) });
  sim.seedJob('p', 'j');
  return sim;
}

afterEach(async () => {
  await sim?.close();
  sim = undefined;
});
afterAll(() => closeRaw());

/** A small seeded generator, so shares of faults are the same on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

describe('faults that replace processing', () => {
  it('answers 500, 502 or 503 JSON without processing', async () => {
    const s = await withFaults({ serverErrorRate: 1 });
    const answers = [];
    for (let i = 0; i < 12; i += 1) answers.push(await send(s.url, 'p', 'j', 'hi'));
    answers.push(await get(s.url, 'p', 'j'));
    for (const answer of answers) {
      expect([500, 502, 503]).toContain(answer.status);
      expect(answer.json).toEqual({ error: expect.any(String) });
    }
    expect(s.deliveries).toHaveLength(0);
    expect(s.requests.every((r) => r.fault === '5xx' && !r.processed)).toBe(true);
  });

  it('answers an HTML 502 without processing', async () => {
    const s = await withFaults({ htmlErrorRate: 1 });
    const answer = await send(s.url, 'p', 'j', 'hi');
    expect(answer).toMatchObject({
      status: 502,
      contentType: expect.stringMatching(/^text\/html/),
    });
    expect(answer.text).toContain('<h1>502 Bad Gateway</h1>');
    expect(s.deliveries).toHaveLength(0);
  });

  it('draws each rate independently per request', async () => {
    const s = await withFaults({ serverErrorRate: 0.3 }, seeded(42));
    let failed = 0;
    for (let i = 0; i < 200; i += 1) if ((await get(s.url, 'p', 'j')).status >= 500) failed += 1;
    expect(failed).toBeGreaterThan(30);
    expect(failed).toBeLessThan(90);
  });
});

describe('faults after processing', () => {
  it('processes a send and never answers it (timeout)', async () => {
    const s = await withFaults({ timeoutRate: 1 });
    await expect(send(s.url, 'p', 'j', 'hi', { timeoutMs: 300 })).rejects.toMatchObject({
      code: 'UND_ERR_HEADERS_TIMEOUT',
    });
    expect(s.requests[0]).toMatchObject({
      kind: 'send',
      status: 0,
      processed: true,
      fault: 'timeout',
    });
    expect(s.deliveries.map((d) => d.prompt)).toEqual(['hi']);
    expect((await get(s.url, 'p', 'j')).status).toBe(200); // GETs are never left hanging
  });

  it('processes a send and resets the connection', async () => {
    const s = await withFaults({ resetRate: 1 });
    await expect(send(s.url, 'p', 'j', 'hi')).rejects.toMatchObject({
      code: expect.stringMatching(/^(ECONNRESET|UND_ERR_SOCKET)$/),
    });
    expect(s.requests[0]).toMatchObject({ status: 0, processed: true, fault: 'reset' });
    expect(s.deliveries).toHaveLength(1);
    expect((await get(s.url, 'p', 'j')).status).toBe(200);
  });

  it('answers 200 with broken JSON after processing', async () => {
    const s = await withFaults({ malformedJsonRate: 1 });
    const answer = await send(s.url, 'p', 'j', 'hi');
    expect(answer).toMatchObject({ status: 200, contentType: 'application/json', json: undefined });
    expect(answer.text.startsWith('{"id":"j"')).toBe(true);
    expect(s.requests[0]).toMatchObject({ processed: true, fault: 'malformed' });
    expect(s.deliveries).toHaveLength(1);
  });

  it('shows an undocumented status on GETs only, leaving the job unchanged', async () => {
    const s = await withFaults({ unknownStatusRate: 1 });
    expect((await get(s.url, 'p', 'j')).json).toMatchObject({ id: 'j', status: 'queued_v3' });
    expect(s.getJob('p', 'j')?.status).toBe('completed');
    expect((await send(s.url, 'p', 'j', 'hi')).json).toMatchObject({ status: 'active' });
    expect(s.requests[0]?.fault).toBe('unknown-status');
  });
});

describe('slow answers', () => {
  it('adds a fixed latency or one from a range', async () => {
    const s = await withFaults({ latencyMs: 150 });
    let startedAt = Date.now();
    await get(s.url, 'p', 'j');
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(145);
    s.setFaults({ latencyMs: [60, 80] });
    startedAt = Date.now();
    await get(s.url, 'p', 'j');
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(55);
  });

  it('writes a 200 body in two chunks slowBodyMs apart', async () => {
    const s = await withFaults({ slowBodyMs: 250 });
    const startedAt = Date.now();
    const answer = await get(s.url, 'p', 'j');
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(245);
    expect(answer.json).toMatchObject({ id: 'j' });
    expect(s.requests[0]?.fault).toBe('slow-body');
    s.setFaults({ slowBodyMs: 0 });
    expect((await get(s.url, 'p', 'nope')).status).toBe(404);
  });
});
