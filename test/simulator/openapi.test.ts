import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OpenAPIBackend, type Document } from 'openapi-backend';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AgentApiClient } from '../../src/agent-api/index.js';
import type { Simulator } from '../../src/simulator/index.js';
import { eventually } from '../support/namespace.js';
import { TEST_API_KEY, startTestSimulator } from '../support/simulator.js';

/**
 * Holds the client and the simulator to the vendor's OpenAPI document: the client talks to the
 * simulator through a recording proxy, and every real request and answer is validated with
 * openapi-backend against `../shared/agent-api/openapi.json`, so neither can drift from the contract.
 */

const SPEC_URL = new URL('../../../shared/agent-api/openapi.json', import.meta.url);

/** One recorded exchange, as it crossed the wire. */
interface Exchange {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[]>;
  readonly body: string;
  readonly status: number;
  readonly contentType: string;
  readonly answer: string;
}

/** The document as published, plus operation ids (it has none) so the validator can name them. */
function loadDocument(): Document {
  const doc = JSON.parse(readFileSync(SPEC_URL, 'utf8')) as {
    paths: Record<string, Record<string, { operationId?: string }>>;
  };
  doc.paths['/v2/agent/{projectId}/job']!['post']!.operationId = 'createJob';
  doc.paths['/v2/agent/{projectId}/job/{id}']!['get']!.operationId = 'getJob';
  doc.paths['/v2/agent/{projectId}/job/{id}/message']!['post']!.operationId = 'sendMessage';
  return doc as unknown as Document;
}

const OUTCOMES = ['completed', 'completed_no_pr', 'failed', 'archived'] as const;

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;

const api = new OpenAPIBackend({
  definition: loadDocument(),
  strict: true,
  // openapi-backend ignores unknown formats; the document uses `uri` and `date-time`, so check them.
  customizeAjv: (ajv) => {
    ajv.addFormat('uri', { type: 'string', validate: (s: string) => URL.canParse(s) });
    ajv.addFormat('date-time', {
      type: 'string',
      validate: (s: string) => RFC3339.test(s) && !Number.isNaN(Date.parse(s)),
    });
    return ajv;
  },
});

let sim: Simulator;
let proxy: Server;
let client: AgentApiClient;
const upstream = new Agent();
const exchanges: Exchange[] = [];

beforeAll(async () => {
  await api.init();
  sim = await startTestSimulator({
    workTimeMs: 100,
    sendLimit: { max: 3, windowMs: 60_000 },
    outcome: (_projectId, jobId) => OUTCOMES.find((o) => jobId === `run-${o}`) ?? 'completed',
  });
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = req.headers as Record<string, string | string[]>;
      const method = req.method === 'POST' ? 'POST' : 'GET';
      const answer = await request(`${sim.url}${req.url}`, {
        method,
        headers,
        body: method === 'POST' ? body : undefined,
        dispatcher: upstream,
      });
      const text = await answer.body.text();
      const contentType = String(answer.headers['content-type'] ?? '');
      exchanges.push({
        method,
        path: req.url ?? '',
        headers,
        body,
        status: answer.statusCode,
        contentType,
        answer: text,
      });
      res.writeHead(answer.statusCode, { 'content-type': contentType });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as AddressInfo;
  client = new AgentApiClient({
    baseUrl: `http://127.0.0.1:${port}`,
    apiKey: TEST_API_KEY,
    connectTimeoutMs: 1_000,
    requestTimeoutMs: 2_000,
  });
});

afterAll(async () => {
  await client.close();
  await new Promise<void>((resolve) => {
    proxy.close(() => resolve());
    proxy.closeAllConnections();
  });
  await upstream.close();
  await sim.close();
});

beforeEach(() => {
  exchanges.length = 0;
});

/** Matches an exchange to its operation and validates both directions against the document. */
function validate(exchange: Exchange, operationId: string) {
  const req = {
    method: exchange.method,
    path: exchange.path,
    headers: exchange.headers,
    body: exchange.body ? JSON.parse(exchange.body) : undefined,
  };
  const operation = api.matchOperation(req);
  expect(operation?.operationId).toBe(operationId);
  const documented = Object.keys((operation?.responses ?? {}) as object);
  expect(documented).toContain(String(exchange.status));
  expect(exchange.contentType).toBe('application/json');
  expect(exchange.headers.authorization).toMatch(/^Bearer \S+$/);
  return {
    request: api.validateRequest(req, operation),
    response: api.validateResponse(JSON.parse(exchange.answer), operationId, exchange.status),
  };
}

const only = (): Exchange => {
  expect(exchanges).toHaveLength(1);
  return exchanges[0]!;
};

describe('send follow-up message', () => {
  it('the client sends a valid request and the simulator answers a valid 200 job', async () => {
    sim.seedJob('proj', 'job-1');
    await client.sendMessage('proj', 'job-1', 'update the changelog');
    expect(validate(only(), 'sendMessage')).toEqual({
      request: expect.objectContaining({ valid: true }),
      response: expect.objectContaining({ valid: true, errors: null }),
    });
  });

  it('an empty prompt breaks the document, and the 400 answer follows it', async () => {
    sim.seedJob('proj', 'job-2');
    await expect(client.sendMessage('proj', 'job-2', '')).rejects.toMatchObject({
      code: 'bad_request',
    });
    const result = validate(only(), 'sendMessage');
    expect(result.request.valid).toBe(false);
    expect(result.response.valid).toBe(true);
  });

  it('the 404 answer follows the Error schema', async () => {
    await expect(client.sendMessage('proj', 'missing', 'hi')).rejects.toMatchObject({
      code: 'not_found',
    });
    const result = validate(only(), 'sendMessage');
    expect([result.request.valid, result.response.valid]).toEqual([true, true]);
  });

  it('the 429 answer follows the Error schema', async () => {
    sim.seedJob('busy', 'job');
    for (let i = 0; i < 3; i += 1) await client.sendMessage('busy', 'job', `m${i}`);
    await expect(client.sendMessage('busy', 'job', 'one too many')).rejects.toMatchObject({
      code: 'rate_limited',
    });
    for (const [i, exchange] of exchanges.entries()) {
      expect(exchange.status).toBe(i < 3 ? 200 : 429);
      expect(validate(exchange, 'sendMessage').response.valid).toBe(true);
    }
  });
});

describe('create agent job', () => {
  it('the client sends a valid request and the simulator answers a valid 201 job, whose run proceeds', async () => {
    const job = await client.createJob('proj', 'start the docs site');
    expect(validate(only(), 'createJob')).toEqual({
      request: expect.objectContaining({ valid: true }),
      response: expect.objectContaining({ valid: true, errors: null }),
    });
    expect(only().status).toBe(201);
    expect(job.status).toBe('active');
    await eventually(() => (sim.getJob('proj', job.id!)?.status !== 'active' ? true : undefined));
    const created = sim.deliveries.filter((d) => d.kind === 'create');
    expect(created.map((d) => [d.kind, d.jobId, d.prompt])).toEqual([
      ['create', job.id, 'start the docs site'],
    ]);
  });

  it('an empty prompt breaks the document, and the 400 answer follows it', async () => {
    await expect(client.createJob('proj', '')).rejects.toMatchObject({ code: 'bad_request' });
    const result = validate(only(), 'createJob');
    expect([result.request.valid, result.response.valid]).toEqual([false, true]);
  });
});

describe('get agent job', () => {
  it.each(OUTCOMES)('answers a valid job while active and once %s', async (outcome) => {
    const jobId = `run-${outcome}`;
    const projectId = `proj/${outcome}`;
    sim.seedJob(projectId, jobId, {
      source: { repository: 'https://github.com/acme/docs', ref: null },
    });
    await client.sendMessage(projectId, jobId, 'go');
    expect((await client.getJob(projectId, jobId)).status).toBe('active');
    await eventually(() => (sim.getJob(projectId, jobId)?.status !== 'active' ? true : undefined));
    expect((await client.getJob(projectId, jobId)).status).toBe(
      outcome === 'completed_no_pr' ? 'completed' : outcome,
    );
    const reads = exchanges.slice(1);
    expect(reads).toHaveLength(2);
    for (const exchange of reads)
      expect(validate(exchange, 'getJob')).toMatchObject({
        request: { valid: true },
        response: { valid: true },
      });
  });

  it('the 404 answer follows the Error schema', async () => {
    await expect(client.getJob('proj', 'missing')).rejects.toMatchObject({ code: 'not_found' });
    expect(validate(only(), 'getJob').response.valid).toBe(true);
  });
});

describe('the validator is live', () => {
  it('rejects an undocumented status and a prLink that is not a URI', () => {
    const bad = [
      { id: 'j', status: 'queued_v3' },
      { id: 'j', status: 'completed', prLink: 'not a link' },
      { createdAt: 'yesterday' },
    ];
    for (const body of bad) expect(api.validateResponse(body, 'getJob', 200).valid).toBe(false);
    expect(api.validateResponse({ error: 42 }, 'sendMessage', 429).valid).toBe(false);
  });
});
