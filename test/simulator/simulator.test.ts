import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Simulator, SimulatorOptions } from '../../src/simulator/index.js';
import { eventually } from '../support/namespace.js';
import { startTestSimulator } from '../support/simulator.js';
import { closeRaw, get, raw, send } from './raw-http.js';

/** The simulator's endpoints and job lifecycle, over real HTTP. */

const open: Simulator[] = [];

async function simulator(options: Partial<SimulatorOptions> = {}): Promise<Simulator> {
  const sim = await startTestSimulator(options);
  open.push(sim);
  return sim;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((sim) => sim.close()));
});
afterAll(() => closeRaw());

describe('requests', () => {
  it('answers 401 JSON without or with a wrong key, and records it unauthorized', async () => {
    const sim = await simulator();
    sim.seedJob('p', 'j');
    for (const key of [null, 'wrong']) {
      const answer = await send(sim.url, 'p', 'j', 'hi', { key });
      expect(answer).toMatchObject({
        status: 401,
        contentType: 'application/json',
        json: { error: expect.any(String) },
      });
    }
    expect(sim.requests.map((r) => [r.authorized, r.processed, r.status])).toEqual([
      [false, false, 401],
      [false, false, 401],
    ]);
    expect(sim.deliveries).toHaveLength(0);
  });

  it.each([
    ['a body that is not JSON', { rawBody: '{prompt:' }],
    ['a JSON array', { body: ['hi'] }],
    ['no prompt', { body: { text: 'hi' } }],
    ['a number prompt', { body: { prompt: 7 } }],
    ['an empty prompt', { body: { prompt: '' } }],
  ])('answers 400 JSON to %s', async (_what, options) => {
    const sim = await simulator();
    sim.seedJob('p', 'j');
    const answer = await raw(sim.url, 'POST', '/v2/agent/p/job/j/message', options);
    expect(answer).toMatchObject({ status: 400, json: { error: expect.any(String) } });
    expect(sim.deliveries).toHaveLength(0);
  });

  it('answers 404 to unknown jobs and paths', async () => {
    const sim = await simulator();
    expect((await send(sim.url, 'p', 'nope', 'hi')).status).toBe(404);
    expect((await get(sim.url, 'p', 'nope')).json).toEqual({ error: 'job not found' });
    expect((await raw(sim.url, 'GET', '/v2/agent/p/jobs')).status).toBe(404);
    expect((await raw(sim.url, 'GET', '/v2/agent/p/job/j/message')).status).toBe(404);
    expect(sim.requests.map((r) => r.kind)).toEqual(['send', 'get', 'other', 'other']);
  });

  it('creates unknown jobs on the fly with autoCreateJobs', async () => {
    const sim = await simulator({ autoCreateJobs: true });
    expect((await get(sim.url, 'p', 'new')).json).toMatchObject({ id: 'new', status: 'completed' });
    expect((await send(sim.url, 'p', 'other', 'hi')).status).toBe(200);
    expect(sim.getJob('p', 'other')?.status).toBe('active');
  });

  it('decodes ids from the path, so they may hold / and %', async () => {
    const sim = await simulator();
    sim.seedJob('a/b', 'c %2F d');
    expect((await get(sim.url, 'a/b', 'c %2F d')).json).toMatchObject({ id: 'c %2F d' });
    expect(sim.requests[0]).toMatchObject({
      projectId: 'a/b',
      jobId: 'c %2F d',
      path: '/v2/agent/a%2Fb/job/c%20%252F%20d',
    });
  });
});

describe('job lifecycle', () => {
  it('turns active on a send, then completed with a new pull request after the work time', async () => {
    const sim = await simulator({ workTimeMs: 100 });
    const seeded = sim.seedJob('p', 'j', { prLink: 'https://github.com/acme/j/pull/0' });
    expect(seeded).toMatchObject({
      id: 'j',
      status: 'completed',
      model: expect.any(String),
      createdAt: expect.any(String),
    });
    expect(seeded.source?.repository).toMatch(/^https:\/\/github\.com\//);
    const answer = await send(sim.url, 'p', 'j', 'go');
    expect(answer.json).toMatchObject({ status: 'active', prLink: null });
    const done = await eventually(async () => {
      const job = (await get(sim.url, 'p', 'j')).json as { status: string; prLink: string };
      return job.status === 'completed' ? job : undefined;
    });
    expect(done.prLink).toMatch(/^https:\/\/github\.com\/acme\/j\/pull\/\d+$/);
    expect(done.prLink).not.toBe(seeded.prLink);
    expect(sim.deliveries).toEqual([
      { at: expect.any(Number), projectId: 'p', jobId: 'j', prompt: 'go' },
    ]);
  });

  it.each([
    ['completed_no_pr', { status: 'completed', prLink: null, archivedAt: null }],
    ['failed', { status: 'failed', prLink: null }],
    ['archived', { status: 'archived', archivedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }],
  ] as const)('ends a run as %s', async (outcome, expected) => {
    const sim = await simulator({ workTimeMs: 20, outcome: () => outcome });
    sim.seedJob('p', 'j');
    await send(sim.url, 'p', 'j', 'go');
    await eventually(() => (sim.getJob('p', 'j')?.status !== 'active' ? true : undefined));
    expect(sim.getJob('p', 'j')).toMatchObject(expected);
  });

  it('accepts a follow-up to an active job and restarts its work timer', async () => {
    const outcomes: string[] = [];
    const sim = await simulator({
      workTimeMs: 600,
      outcome: (_p, _j, prompt) => {
        outcomes.push(prompt);
        return 'completed';
      },
    });
    sim.seedJob('p', 'j');
    await send(sim.url, 'p', 'j', 'first');
    const firstAt = Date.now();
    await eventually(() => (Date.now() - firstAt >= 300 ? true : undefined), { intervalMs: 10 });
    expect((await send(sim.url, 'p', 'j', 'second')).status).toBe(200);
    const secondAt = Date.now();
    await eventually(() => (sim.getJob('p', 'j')?.status === 'completed' ? true : undefined), {
      intervalMs: 10,
    });
    expect(Date.now() - secondAt).toBeGreaterThanOrEqual(550);
    expect(outcomes).toEqual(['second']);
    expect(sim.deliveries.map((d) => d.prompt)).toEqual(['first', 'second']);
  });

  it('keeps showing the previous terminal state for staleTerminalMs, also in the POST answer', async () => {
    const oldLink = 'https://github.com/acme/j/pull/0';
    const sim = await simulator({ workTimeMs: 300, staleTerminalMs: 400 });
    sim.seedJob('p', 'j', { prLink: oldLink });
    const sentAt = Date.now();
    expect((await send(sim.url, 'p', 'j', 'go')).json).toMatchObject({
      status: 'completed',
      prLink: oldLink,
    });
    const sequence: string[] = [];
    let activeAt: number | undefined;
    await eventually(
      async () => {
        const job = (await get(sim.url, 'p', 'j')).json as {
          status: string;
          prLink: string | null;
        };
        if (sequence.at(-1) !== job.status) sequence.push(job.status);
        if (job.status === 'active') activeAt ??= Date.now();
        return job.status === 'completed' && job.prLink !== oldLink ? true : undefined;
      },
      { intervalMs: 20 },
    );
    expect(sequence).toEqual(['completed', 'active', 'completed']);
    expect(activeAt! - sentAt).toBeGreaterThanOrEqual(390);
  });

  it('applies setStaleTerminalMs to later sends', async () => {
    const sim = await simulator({ workTimeMs: 5_000 });
    sim.seedJob('p', 'j');
    sim.setStaleTerminalMs(10_000);
    expect((await send(sim.url, 'p', 'j', 'go')).json).toMatchObject({ status: 'completed' });
    sim.seedJob('p', 'k');
    sim.setStaleTerminalMs(0);
    expect((await send(sim.url, 'p', 'k', 'go')).json).toMatchObject({ status: 'active' });
  });
});

describe('records', () => {
  it('records every request in order and counts GETs per project and job', async () => {
    const sim = await simulator();
    sim.seedJob('p', 'j');
    sim.seedJob('q', 'k');
    await get(sim.url, 'p', 'j');
    await get(sim.url, 'p', 'j');
    await get(sim.url, 'q', 'k');
    await send(sim.url, 'p', 'j', 'hi');
    expect(sim.requests.map((r) => [r.seq, r.method, r.kind, r.status])).toEqual([
      [1, 'GET', 'get', 200],
      [2, 'GET', 'get', 200],
      [3, 'GET', 'get', 200],
      [4, 'POST', 'send', 200],
    ]);
    expect(sim.requests[3]).toMatchObject({
      prompt: 'hi',
      processed: true,
      authorized: true,
      at: expect.any(Number),
    });
    expect([
      sim.countGets(),
      sim.countGets('p'),
      sim.countGets('p', 'j'),
      sim.countGets('q', 'x'),
    ]).toEqual([3, 2, 2, 0]);
    sim.reset();
    expect([sim.requests.length, sim.deliveries.length, sim.countGets()]).toEqual([0, 0, 0]);
    expect(sim.getJob('p', 'j')?.status).toBe('active');
  });

  it('closes promptly with a request left hanging by the timeout fault', async () => {
    const sim = await startTestSimulator({ faults: { timeoutRate: 1 } });
    sim.seedJob('p', 'j');
    const hanging = send(sim.url, 'p', 'j', 'hi', { timeoutMs: 60_000 }).catch(
      (err: unknown) => err,
    );
    await eventually(() => (sim.deliveries.length === 1 ? true : undefined));
    const startedAt = Date.now();
    await sim.close();
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    expect(await hanging).toBeInstanceOf(Error);
  });
});
