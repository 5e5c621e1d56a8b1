import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The HTTP plumbing of the simulator: routing a raw request line to an endpoint of the OpenAPI
 * document, reading a bounded body, and writing an answer, optionally in two slow chunks.
 */

/** Which endpoint a request is for. Ids are decoded path segments, so they may contain `/`. */
export interface Route {
  readonly kind: 'send' | 'get' | 'create' | 'other';
  readonly path: string;
  readonly projectId?: string;
  readonly jobId?: string;
}

/** Largest request body read; a prompt is at most tens of KB, so this only stops abuse. */
export const MAX_REQUEST_BYTES = 1024 * 1024;

const JOB_PATH = /^\/v2\/agent\/([^/]+)\/job\/([^/]+)(\/message)?\/?$/;
const CREATE_PATH = /^\/v2\/agent\/([^/]+)\/job\/?$/;

/**
 * Matches `POST …/job/{id}/message`, `GET …/job/{id}` and `POST …/job` (create); anything else is
 * `other`.
 */
export function route(method: string, url: string): Route {
  const path = url.split('?', 1)[0] ?? '';
  const created = CREATE_PATH.exec(path);
  const projectOfCreate = created && method === 'POST' ? decode(created[1]) : undefined;
  if (projectOfCreate !== undefined) return { kind: 'create', path, projectId: projectOfCreate };
  const match = JOB_PATH.exec(path);
  if (!match) return { kind: 'other', path };
  const projectId = decode(match[1]);
  const jobId = decode(match[2]);
  if (projectId === undefined || jobId === undefined) return { kind: 'other', path };
  const isMessage = match[3] !== undefined;
  if (isMessage && method === 'POST') return { kind: 'send', path, projectId, jobId };
  if (!isMessage && method === 'GET') return { kind: 'get', path, projectId, jobId };
  return { kind: 'other', path, projectId, jobId };
}

function decode(segment: string | undefined): string | undefined {
  if (segment === undefined) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Reads the whole body; `undefined` when it is larger than {@link MAX_REQUEST_BYTES}. */
export async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > MAX_REQUEST_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** An answer to write. */
export interface SimulatedResponse {
  readonly status: number;
  readonly body: string;
  readonly contentType: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A JSON answer. */
export function json(
  status: number,
  value: unknown,
  headers?: Record<string, string>,
): SimulatedResponse {
  return {
    status,
    body: JSON.stringify(value),
    contentType: 'application/json',
    ...(headers ? { headers } : {}),
  };
}

/** A JSON `{"error": message}` answer, the shape of the document's `Error` schema. */
export function jsonError(
  status: number,
  message: string,
  headers?: Record<string, string>,
): SimulatedResponse {
  return json(status, { error: message }, headers);
}

/**
 * Writes `reply`. With `slowBodyMs > 0` the body goes out in two chunks that far apart; the
 * content length is sent first, so the client waits for the rest (its body timeout applies).
 */
export function writeReply(
  res: ServerResponse,
  reply: SimulatedResponse,
  slowBodyMs: number,
  timers: Set<NodeJS.Timeout>,
): void {
  const body = Buffer.from(reply.body, 'utf8');
  res.writeHead(reply.status, {
    ...reply.headers,
    'content-type': reply.contentType,
    'content-length': String(body.length),
  });
  if (slowBodyMs <= 0 || body.length < 2) {
    res.end(body);
    return;
  }
  const half = Math.floor(body.length / 2);
  res.write(body.subarray(0, half));
  const timer = setTimeout(() => {
    timers.delete(timer);
    if (!res.destroyed) res.end(body.subarray(half));
  }, slowBodyMs);
  timer.unref();
  timers.add(timer);
}
