import { OpenAPIBackend } from 'openapi-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

const INTAKE = 'openapi-intake-token-1';
const OPERATOR = 'openapi-operator-token';

afterAll(() => expectNoLeakedHandles());

describe('GET /openapi.json', () => {
  const served = useTestServer(
    'http-openapi',
    { INTAKE_TOKEN: INTAKE, OPERATOR_TOKEN: OPERATOR },
    () => ({ withProducer: true }),
  );
  let document: Record<string, unknown>;
  let api: OpenAPIBackend;
  beforeAll(async () => {
    const res = await fetch(`${served.app.url}/openapi.json`);
    expect(res.status).toBe(200);
    document = (await res.json()) as Record<string, unknown>;
    // quick: its own check of the document knows OpenAPI 3.0 only (propertyNames is 3.1's).
    api = new OpenAPIBackend({
      definition: structuredClone(document) as never,
      strict: true,
      quick: true,
    });
    await api.init();
  });

  /** Calls a route and checks its request and its real answer against the document. */
  const check = async (method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${served.app.url}${path}`, {
      method,
      headers: {
        ...(token && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const answer: unknown = await res.json();
    const operation = api.matchOperation({ method, path, headers: {} });
    expect(operation, `${method} ${path} is documented`).toBeDefined();
    if (!operation) return answer;
    const documented = Object.keys(operation.responses ?? {});
    expect(documented, `${method} ${path} documents ${res.status}`).toContain(String(res.status));
    const valid = api.validateResponse(answer, operation, res.status);
    expect(
      valid.errors ?? [],
      `${method} ${path} ${res.status}: ${JSON.stringify(answer)}`,
    ).toEqual([]);
    if (res.status < 400 && body !== undefined) {
      const request = { method, path, headers: { 'content-type': 'application/json' }, body };
      expect(api.validateRequest(request, operation).errors ?? []).toEqual([]);
    }
    return answer;
  };

  it('is OpenAPI 3.1 with a bearer scheme per scope and every /v1 route', () => {
    expect(document['openapi']).toBe('3.1.0');
    const components = document['components'] as { securitySchemes: Record<string, unknown> };
    expect(Object.keys(components.securitySchemes)).toEqual([
      'intake',
      'events',
      'operator',
      'dashboard',
    ]);
    const paths = Object.keys(document['paths'] as object);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/v1/followups',
        '/v1/followups/{dispatchId}',
        '/v1/projects/{projectId}/pause',
        '/v1/projects/{projectId}/resume',
        '/v1/projects/{projectId}/limit',
        '/v1/projects/{projectId}',
      ]),
    );
  });

  it('matches the real answers of every route, errors included', async () => {
    const one = { projectId: 'P', jobId: 'j', prompt: 'hi', key: null, meta: { n: 1 } };
    const sent = (await check('POST', '/v1/followups', INTAKE, one)) as { dispatchId: string };
    await check('POST', '/v1/followups', INTAKE, { followups: [{ ...one, key: 'k-1' }] });
    await check('POST', '/v1/followups', INTAKE, [{ ...one, key: 'k-2' }]);
    await check('POST', '/v1/followups', INTAKE, { projectid: 'P', jobId: 'j', prompt: 'x' });
    await check('POST', '/v1/followups', undefined, one);
    await check('POST', '/v1/followups', OPERATOR, one);
    await check('GET', `/v1/followups/${sent.dispatchId}`, INTAKE);
    await check('GET', '/v1/followups/no-such-dispatch', INTAKE);
    await check('DELETE', `/v1/followups/${sent.dispatchId}`, OPERATOR);
    await check('DELETE', `/v1/followups/${sent.dispatchId}`, OPERATOR);
    await check('DELETE', `/v1/followups/${sent.dispatchId}`, INTAKE);
    await check('POST', '/v1/projects/P/pause', OPERATOR);
    await check('POST', '/v1/projects/P/resume', OPERATOR);
    await check('PUT', '/v1/projects/P/limit', OPERATOR, { limit: '50/1h' });
    await check('PUT', '/v1/projects/P/limit', OPERATOR, { limit: 'lots' });
    await check('PUT', '/v1/projects/P/limit', OPERATOR, { limit: null });
    await check('GET', '/v1/projects/P', OPERATOR);
  });

  it('would catch an answer of another shape', () => {
    const operation = api.matchOperation({ method: 'POST', path: '/v1/followups', headers: {} });
    expect(operation).toBeDefined();
    if (!operation) return;
    expect(api.validateResponse({ dispatchId: 7 }, operation, 202).errors).not.toBeNull();
    expect(api.validateResponse({ message: 'x' }, operation, 400).errors).not.toBeNull();
  });
});
