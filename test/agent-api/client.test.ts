import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import {
  AgentApiError,
  statusKind,
  WriteDeadlineError,
  type AgentApiClient,
} from '../../src/agent-api/index.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { failure, testClient } from './servers.js';

/**
 * The client against the simulator: real HTTP exchanges for every status the API documents, the
 * faults that leave a body unusable, path encoding, and tolerance of unknown fields and statuses.
 */

const sim = useSimulator({ workTimeMs: 60_000, sendLimit: { max: 1_000, windowMs: 60_000 } });
let client: AgentApiClient;

beforeEach(() => {
  sim().reset();
  sim().setFaults({
    serverErrorRate: 0,
    htmlErrorRate: 0,
    malformedJsonRate: 0,
    unknownStatusRate: 0,
    slowBodyMs: 0,
    plainText429: false,
    retryAfter: false,
  });
  client ??= testClient(sim().url);
});

afterAll(async () => {
  await client.close();
});

describe('success', () => {
  it('sends a follow-up and returns the job the 200 shows', async () => {
    sim().seedJob('proj', 'job-send');
    const job = await client.sendMessage('proj', 'job-send', 'fix the typo');
    expect(job).toMatchObject({ id: 'job-send', status: 'active', prLink: null });
    expect(sim().deliveries).toEqual([
      expect.objectContaining({ projectId: 'proj', jobId: 'job-send', prompt: 'fix the typo' }),
    ]);
    expect(sim().requests[0]).toMatchObject({
      method: 'POST',
      kind: 'send',
      authorized: true,
      status: 200,
    });
  });

  it('reads a job and drops fields outside the contract, also inside source', async () => {
    // What a vendor may add without notice: the simulator serves whatever it was seeded with.
    const vendorFields = {
      source: { repository: 'https://github.com/acme/docs', ref: null, commit: 'abc123' },
      branchUrl: 'https://github.com/acme/docs/tree/x',
    };
    sim().seedJob('proj', 'job-extra', vendorFields);
    const job = await client.getJob('proj', 'job-extra');
    expect(job).not.toHaveProperty('branchUrl');
    expect(job).toMatchObject({ id: 'job-extra' });
    expect(job.source).toEqual({ repository: 'https://github.com/acme/docs', ref: null });
  });

  it('tolerates a status the document does not list', async () => {
    sim().seedJob('proj', 'job-odd');
    sim().setFaults({ unknownStatusRate: 1 });
    const job = await client.getJob('proj', 'job-odd');
    expect(job.status).toBe('queued_v3');
    expect(statusKind(job.status)).toBe('unknown');
  });

  it.each([
    ['a slash', 'proj/with/slash', 'job/1'],
    ['spaces and percent', 'proj 100%', 'job %2F x'],
    ['dot segments', '..', '.'],
    ['unicode and reserved characters', 'prój?#&=', 'job+;,@'],
  ])('encodes path parameters with %s', async (_what, projectId, jobId) => {
    sim().seedJob(projectId, jobId);
    await client.sendMessage(projectId, jobId, 'hi');
    const job = await client.getJob(projectId, jobId);
    expect(job.id).toBe(jobId);
    expect(sim().requests.map((r) => [r.kind, r.projectId, r.jobId])).toEqual([
      ['send', projectId, jobId],
      ['get', projectId, jobId],
    ]);
  });

  it('rejects an empty id without a request', async () => {
    const err = await failure(client.getJob('proj', ''));
    expect(err).toMatchObject({ code: 'bad_request', ambiguous: false, httpStatus: undefined });
    expect(sim().requests).toHaveLength(0);
  });
});

describe('error statuses', () => {
  it('maps 400 (an empty prompt) to bad_request with the server message', async () => {
    sim().seedJob('proj', 'job-400');
    const err = await failure(client.sendMessage('proj', 'job-400', ''));
    expect(err).toMatchObject({ code: 'bad_request', httpStatus: 400, ambiguous: false });
    expect(err.serverMessage).toBe('prompt must be a non-empty string');
    expect(sim().deliveries).toHaveLength(0);
  });

  it('maps 401 (a wrong key) to unauthorized without echoing either key', async () => {
    sim().seedJob('proj', 'job-401');
    const wrong = testClient(sim().url, { apiKey: `${TEST_API_KEY}-wrong` });
    const err = await failure(wrong.getJob('proj', 'job-401'));
    await wrong.close();
    expect(err).toMatchObject({ code: 'unauthorized', httpStatus: 401, ambiguous: false });
    expect(err.message).not.toContain('wrong');
  });

  it('takes a rotated key without a new pool, and rejects a malformed one without echoing it', async () => {
    sim().seedJob('proj', 'job-rotate');
    const rotating = testClient(sim().url);
    try {
      expect(await rotating.getJob('proj', 'job-rotate')).toMatchObject({ id: 'job-rotate' });
      sim().setApiKey('sim-rotated-key-42');
      expect(await failure(rotating.getJob('proj', 'job-rotate'))).toMatchObject({
        code: 'unauthorized',
        httpStatus: 401,
      });
      rotating.setApiKey('sim-rotated-key-42');
      expect(await rotating.getJob('proj', 'job-rotate')).toMatchObject({ id: 'job-rotate' });
      expect(() => rotating.setApiKey('bad key-secret')).toThrow(
        /^apiKey must be a non-empty string of visible ASCII characters$/,
      );
    } finally {
      sim().setApiKey(TEST_API_KEY);
      await rotating.close();
    }
  });

  it('maps 404 to not_found', async () => {
    const err = await failure(client.sendMessage('proj', 'no-such-job', 'hi'));
    expect(err).toMatchObject({
      code: 'not_found',
      httpStatus: 404,
      ambiguous: false,
      serverMessage: 'job not found',
    });
  });

  it('maps a JSON 429 to rate_limited, with Retry-After when the server sends it', async () => {
    sim().seedJob('limited', 'job');
    sim().rateLimitProject('limited', Date.now() + 30_000, { retryAfter: false });
    const bare = await failure(client.sendMessage('limited', 'job', 'hi'));
    expect(bare).toMatchObject({
      code: 'rate_limited',
      httpStatus: 429,
      ambiguous: false,
      retryAfterMs: undefined,
    });
    expect(bare.serverMessage).toMatch(/rate limit/);

    sim().rateLimitProject('limited', Date.now() + 30_000, { retryAfter: true });
    const told = await failure(client.sendMessage('limited', 'job', 'hi'));
    expect(told.retryAfterMs).toBeGreaterThan(25_000);
    expect(told.retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(sim().deliveries).toHaveLength(0);
  });

  it('maps a plain-text 429 to rate_limited with the text as message', async () => {
    sim().seedJob('plain', 'job');
    sim().rateLimitProject('plain', Date.now() + 5_000, { plainText: true, retryAfter: true });
    const err = await failure(client.sendMessage('plain', 'job', 'hi'));
    expect(err).toMatchObject({
      code: 'rate_limited',
      serverMessage: 'rate limit exceeded for this project',
    });
    expect(err.retryAfterMs).toBeGreaterThan(0);
  });

  it('maps 500, 502 and 503 to server, not processed', async () => {
    sim().seedJob('proj', 'job-5xx');
    sim().setFaults({ serverErrorRate: 1 });
    const statuses = new Set<number | undefined>();
    for (let i = 0; i < 30 && statuses.size < 3; i += 1) {
      const err = await failure(client.sendMessage('proj', 'job-5xx', 'hi'));
      expect(err).toMatchObject({ code: 'server', ambiguous: false });
      statuses.add(err.httpStatus);
    }
    expect([...statuses].sort()).toEqual([500, 502, 503]);
    expect(sim().deliveries).toHaveLength(0);
  });

  it('maps an HTML 502 to server and keeps a short message', async () => {
    sim().seedJob('proj', 'job-html');
    sim().setFaults({ htmlErrorRate: 1 });
    const err = await failure(client.getJob('proj', 'job-html'));
    expect(err).toMatchObject({ code: 'server', httpStatus: 502, ambiguous: false });
    expect(err.serverMessage).toContain('502 Bad Gateway');
    expect(err.serverMessage?.length).toBeLessThanOrEqual(200);
  });
});

describe('unusable 2xx bodies', () => {
  it('maps a malformed JSON 200 to bad_response: the send was accepted', async () => {
    sim().seedJob('proj', 'job-broken');
    sim().setFaults({ malformedJsonRate: 1 });
    const err = await failure(client.sendMessage('proj', 'job-broken', 'hi'));
    expect(err).toMatchObject({ code: 'bad_response', httpStatus: 200, ambiguous: false });
    expect(err.cause).toBeInstanceOf(SyntaxError);
    expect(sim().deliveries).toHaveLength(1);
  });

  it('maps a 200 whose body stalls past the body timeout to bad_response: the send was accepted', async () => {
    sim().seedJob('proj', 'job-slow');
    sim().setFaults({ slowBodyMs: 3_000 });
    const impatient = testClient(sim().url, { requestTimeoutMs: 300 });
    const err = await failure(impatient.sendMessage('proj', 'job-slow', 'hi'));
    await impatient.close();
    expect(err).toMatchObject({ code: 'bad_response', httpStatus: 200, ambiguous: false });
    expect(err.cause).toMatchObject({ code: 'UND_ERR_BODY_TIMEOUT' });
    expect(sim().deliveries).toHaveLength(1);
  });

  it('reads a body sent in two slow chunks within the body timeout', async () => {
    sim().seedJob('proj', 'job-chunks');
    sim().setFaults({ slowBodyMs: 200 });
    const job = await client.getJob('proj', 'job-chunks');
    expect(job.id).toBe('job-chunks');
    expect(sim().requests[0]?.fault).toBe('slow-body');
  });
});

describe('a write deadline', () => {
  it('a send whose deadline passed is not written: nothing arrives, and it says why', async () => {
    sim().seedJob('p', 'late');
    const sent = client.sendMessage('p', 'late', 'hello', { writeBy: performance.now() - 1 });
    const err = await sent.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AgentApiError);
    expect(err).toMatchObject({ ambiguous: false });
    expect((err as AgentApiError).cause).toBeInstanceOf(WriteDeadlineError);
    expect(sim().deliveries).toEqual([]);
    // In time, it goes.
    await client.sendMessage('p', 'late', 'hello', { writeBy: performance.now() + 60_000 });
    expect(sim().deliveries).toHaveLength(1);
  });
});
