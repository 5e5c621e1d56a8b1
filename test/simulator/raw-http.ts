import { Agent, request } from 'undici';
import { TEST_API_KEY } from '../support/simulator.js';

/**
 * Plain HTTP calls for the simulator tests, deliberately not through the agent-API client, so the
 * simulator is checked on its own: raw status, headers and body text.
 */

/** What came back. */
export interface RawAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  /** The body parsed as JSON, or `undefined` when it is not JSON. */
  readonly json: unknown;
}

/** How to call: a JSON-able body or raw text, and the key (`null` sends no Authorization). */
export interface RawOptions {
  readonly body?: unknown;
  readonly rawBody?: string;
  readonly key?: string | null;
  readonly timeoutMs?: number;
}

const dispatcher = new Agent({ connections: 16 });

/** Closes the shared dispatcher; call in `afterAll`. */
export function closeRaw(): Promise<void> {
  return dispatcher.close();
}

/** One request to `base + path`. Rejects on transport errors, as undici does. */
export async function raw(
  base: string,
  method: 'GET' | 'POST',
  path: string,
  options: RawOptions = {},
): Promise<RawAnswer> {
  const key = options.key === undefined ? TEST_API_KEY : options.key;
  const headers: Record<string, string> = key === null ? {} : { authorization: `Bearer ${key}` };
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const timeout = options.timeoutMs ?? 5_000;
  const response = await request(`${base}${path}`, {
    method,
    headers,
    body,
    dispatcher,
    headersTimeout: timeout,
    bodyTimeout: timeout,
  });
  const text = await response.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const contentType = String(response.headers['content-type'] ?? '');
  return { status: response.statusCode, contentType, headers: response.headers, text, json };
}

/** `POST /v2/agent/{p}/job/{j}/message` with `{"prompt"}`. */
export function send(
  base: string,
  projectId: string,
  jobId: string,
  prompt: unknown,
  options: RawOptions = {},
) {
  return raw(base, 'POST', `${jobPath(projectId, jobId)}/message`, {
    body: { prompt },
    ...options,
  });
}

/** `GET /v2/agent/{p}/job/{j}`. */
export function get(base: string, projectId: string, jobId: string, options: RawOptions = {}) {
  return raw(base, 'GET', jobPath(projectId, jobId), options);
}

function jobPath(projectId: string, jobId: string): string {
  return `/v2/agent/${encodeURIComponent(projectId)}/job/${encodeURIComponent(jobId)}`;
}
