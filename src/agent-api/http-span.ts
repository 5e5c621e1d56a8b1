import { context, SpanKind, trace, type Span, type Tracer } from '@opentelemetry/api';
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
} from '@opentelemetry/semantic-conventions';
import type { Dispatcher } from 'undici';
import { SPAN_ATTRIBUTES } from '../telemetry/names.js';
import { traceparentOf } from '../telemetry/trace-context.js';
import { errorTypeOf, fail } from '../telemetry/tracing.js';
import type { Operation } from './errors.js';
import { exchange, type ExchangeResult } from './exchange.js';

/**
 * The agent-API client's own span: one HTTP client span (CLIENT, HTTP semconv) per request, the
 * child of the span it runs in (the worker's `process dispatch`, the poller's read), whose
 * `traceparent` the request carries. The client comes here only when a tracer is registered
 * (`activeTracer`); otherwise it runs the exchange bare. The rest of the service's spans are
 * `telemetry/tracing.ts`.
 */

/** The routes of the calls, as the HTTP spans' `url.template` (after the base path). */
const TEMPLATES = {
  send: '/v2/agent/{projectId}/job/{id}/message',
  get: '/v2/agent/{projectId}/job/{id}',
  create: '/v2/agent/{projectId}/job',
} as const;

/** What the agent-API client tells of one request, for its HTTP client span. */
export interface HttpCall {
  readonly op: Operation;
  /** The API's base path (`AGENT_API_URL`'s path, without its trailing `/`). */
  readonly basePath: string;
  readonly url: URL;
}

/**
 * Runs one exchange (see `exchange.ts`) on `dispatcher` in the HTTP client span of `call`; the
 * request carries the span's `traceparent` when the span records.
 */
export async function exchangeInSpan(
  tracer: Tracer,
  call: HttpCall,
  dispatcher: Dispatcher,
  request: Dispatcher.DispatchOptions,
  signal: AbortSignal | undefined,
  writeBy: number | undefined,
): Promise<ExchangeResult> {
  const span = startHttpSpan(tracer, call);
  const traceparent = span.isRecording()
    ? traceparentOf(trace.setSpan(context.active(), span))
    : undefined;
  const outcome = await exchange(
    dispatcher,
    traceparent ? { ...request, headers: { ...request.headers, traceparent } } : request,
    signal,
    writeBy,
  ).catch((err: unknown) => {
    endHttpSpan(span, undefined, err);
    throw err;
  });
  endHttpSpan(span, outcome.status, outcome.ok ? undefined : outcome.cause);
  return outcome;
}

function startHttpSpan(tracer: Tracer, { op, basePath, url }: HttpCall): Span {
  const method = op === 'get' ? 'GET' : 'POST';
  const template = `${basePath}${TEMPLATES[op]}`;
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  return tracer.startSpan(`${method} ${template}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      [ATTR_HTTP_REQUEST_METHOD]: method,
      [ATTR_URL_FULL]: url.href,
      [SPAN_ATTRIBUTES.urlTemplate]: template,
      [ATTR_SERVER_ADDRESS]: url.hostname,
      [ATTR_SERVER_PORT]: Number(port),
    },
  });
}

/**
 * Ends the span with what came of the request: the response's status, or none and why
 * (`error.type`). A status of 400 or more names the failure; otherwise the transport's failure does.
 */
function endHttpSpan(span: Span, status: number | undefined, cause: unknown): void {
  if (status !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
  if (status !== undefined && status >= 400) fail(span, String(status));
  else if (status === undefined || cause !== undefined) fail(span, errorTypeOf(cause));
  span.end();
}
