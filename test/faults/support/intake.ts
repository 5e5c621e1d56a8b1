import type { Config } from '../../../src/config/index.js';
import { createLogger, type Logger } from '../../../src/telemetry/logger.js';
import { startTestServer, type TestServer } from '../../http/fixture.js';
import { partialAnswer, type Answer, type BatchAnswer } from './fuzz-books.js';

/** The HTTP server wired as `serve` wires it, in this process, on a free loopback port. */
export type Intake = Pick<TestServer, 'server' | 'url' | 'close'>;

/** Starts the server with the intake on (`INTAKE_TOKEN`), logging to `logger`. */
export function startIntake(
  config: Config,
  logger: Logger = createLogger('silent'),
): Promise<Intake> {
  return startTestServer(config, { withProducer: true, logger });
}

/** What the intake answered, as a status and its JSON body (or text). */
export interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** POSTs `body` to the intake. */
export async function post(
  url: string,
  token: string,
  body: string,
  contentType = 'application/json',
): Promise<Reply> {
  const res = await fetch(`${url}/v1/followups`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
    body,
  });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed };
}

type Problem = { index?: number; field: string; message: string; dispatchId?: string };

/** A reply to one follow-up, as an {@link Answer}. */
export function singleAnswer(reply: Reply): Answer {
  if (reply.status === 202)
    return { kind: 'accepted', ...(reply.body as { dispatchId: string; deduplicated: boolean }) };
  const problems = reply.body['problems'] as Problem[] | undefined;
  const holder = problems?.[0]?.dispatchId;
  if (reply.status === 409 && holder) return { kind: 'conflict', dispatchId: holder };
  if (reply.status === 400 && problems)
    return {
      kind: 'rejected',
      fields: problems.map((p) => p.field),
      message: problems.map((p) => `${p.field}: ${p.message}`).join('; '),
    };
  return { kind: 'error', message: `${reply.status} ${JSON.stringify(reply.body)}` };
}

/** A reply to a batch, as a {@link BatchAnswer}. */
export function batchAnswer(reply: Reply): BatchAnswer {
  const results = reply.body['results'] as
    { dispatchId: string; deduplicated: boolean }[] | undefined;
  if (reply.status === 202 && results) return { kind: 'accepted', results };
  const problems = reply.body['problems'] as Problem[] | undefined;
  const partial = reply.body['results'] as ({ dispatchId: string; deduplicated: boolean } | null)[];
  if (reply.status === 409 && problems && partial)
    return partialAnswer(partial, (i) => problems.find((p) => p.index === i)?.dispatchId);
  if (reply.status === 400 && problems) return { kind: 'rejected', problems };
  return { kind: 'error', message: `${reply.status} ${JSON.stringify(reply.body)}` };
}
