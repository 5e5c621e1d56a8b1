import { context, SpanKind, trace } from '@opentelemetry/api';
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
} from '@opentelemetry/semantic-conventions';
import { SPAN_ATTRIBUTES } from '../telemetry/names.js';
import { activeTracer, traceparentOf } from '../telemetry/trace-context.js';
import { errorTypeOf, fail } from '../telemetry/tracing.js';

/**
 * The agent-API client's own span: one HTTP client span (CLIENT, HTTP semconv) per request, the
 * child of the span it runs in (the worker's `process dispatch`, the poller's read), whose
 * `traceparent` the request carries. The rest of the service's spans are `telemetry/tracing.ts`.
 */

/** What the agent-API client tells of one request, for its HTTP client span. */
export interface HttpCall {
  readonly method: 'GET' | 'POST';
  /** The low-cardinality route, as `url.template`. */
  readonly template: string;
  readonly url: URL;
}

/** What came of one request: the response's status, or none and why (`error.type`). */
export interface HttpOutcome {
  readonly status: number | undefined;
  readonly cause?: unknown;
}

/** An open HTTP client span: the `traceparent` its request carries, and its end. */
export interface HttpSpan {
  readonly traceparent: string | undefined;
  /** Ends the span with what came of the request. */
  end(outcome: HttpOutcome): void;
}

/**
 * Opens the HTTP client span of one agent-API request, described by `callOf` (called only when
 * tracing); `undefined` when no tracer is registered. A status of 400 or more names the failure
 * at its end; otherwise the transport's failure does.
 */
export function startHttpSpan(callOf: () => HttpCall): HttpSpan | undefined {
  const tracer = activeTracer();
  if (!tracer) return undefined;
  const call = callOf();
  const port = call.url.port || (call.url.protocol === 'https:' ? '443' : '80');
  const span = tracer.startSpan(`${call.method} ${call.template}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      [ATTR_HTTP_REQUEST_METHOD]: call.method,
      [ATTR_URL_FULL]: call.url.href,
      [SPAN_ATTRIBUTES.urlTemplate]: call.template,
      [ATTR_SERVER_ADDRESS]: call.url.hostname,
      [ATTR_SERVER_PORT]: Number(port),
    },
  });
  return {
    traceparent: span.isRecording()
      ? traceparentOf(trace.setSpan(context.active(), span))
      : undefined,
    end({ status, cause }) {
      if (status !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (status !== undefined && status >= 400) fail(span, String(status));
      else if (status === undefined || cause !== undefined) fail(span, errorTypeOf(cause));
      span.end();
    },
  };
}
