import {
  context,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
} from '@opentelemetry/api';
import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions';
import { QUEUE_NAMES } from '../redis/keys.js';
import { SPAN_ATTRIBUTES, SPAN_NAMES } from './names.js';
import { activeTracer, contextOf, traceparentOf, TRACER_NAME } from './trace-context.js';

/**
 * The service's spans, but the agent-API client's own (`agent-api/http-span.ts`, on the helpers
 * exported here); roles call these thin functions at the points of use.
 * Only the OpenTelemetry API is used: without an SDK registered (no OTEL_TRACES_EXPORTER, see
 * `tracing-sdk.ts`) every span is a no-op and no trace context is made up. The library's caller
 * may register its own SDK: its active context is then the parent of `send dispatch`. How a
 * follow-up's trace context travels between the roles is `trace-context.ts`.
 */

/** The messaging attributes of an operation on one follow-up (OpenTelemetry semconv). */
function messaging(operation: 'send' | 'process' | 'settle', dispatchId: string): Attributes {
  return {
    [SPAN_ATTRIBUTES.messagingSystem]: 'bullmq',
    [SPAN_ATTRIBUTES.destination]: QUEUE_NAMES.dispatch,
    [SPAN_ATTRIBUTES.operationType]: operation,
    [SPAN_ATTRIBUTES.operationName]: operation,
    [SPAN_ATTRIBUTES.messageId]: dispatchId,
  };
}

/** A low-cardinality name for a failure: its `code`, else its class name. */
export function errorTypeOf(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
    if (err instanceof Error) return err.name;
  }
  return '_OTHER';
}

/** Marks `span` failed with `error.type`; the message is left out (it may quote a response). */
export function fail(span: Span, errorType: string): void {
  span.setAttribute(ATTR_ERROR_TYPE, errorType);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/**
 * Runs `fn` while `span` is open and ends it after. A thrown error is rethrown, once `failed`
 * marked the span with it (by default: failed, with the error's `error.type`).
 */
async function spanning<T>(
  span: Span,
  fn: () => Promise<T>,
  failed: (err: unknown) => void = (err) => fail(span, errorTypeOf(err)),
): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    failed(err);
    throw err;
  } finally {
    span.end();
  }
}

/**
 * The producer's spans, one `send dispatch` (PRODUCER) per follow-up, children of the caller's
 * active context. `traceparents[i]` goes into follow-up i's record; `end` closes them all.
 */
export function startSendSpans(count: number): {
  readonly traceparents: readonly (string | undefined)[];
  end(ids: readonly string[] | undefined, err?: unknown): void;
} {
  const parent = context.active();
  const spans = Array.from({ length: count }, () =>
    // Without a provider, a no-op span that still carries the caller's context (propagation).
    trace.getTracer(TRACER_NAME).startSpan(SPAN_NAMES.send, { kind: SpanKind.PRODUCER }, parent),
  );
  return {
    traceparents: spans.map((span) => traceparentOf(trace.setSpan(parent, span))),
    end(ids, err) {
      for (const [i, span] of spans.entries()) {
        const id = ids?.[i];
        span.setAttributes(messaging('send', id ?? ''));
        if (err !== undefined) fail(span, errorTypeOf(err));
        span.end();
      }
    },
  };
}

/**
 * Runs one worker attempt of a follow-up in its `process dispatch` span (CONSUMER), a child of
 * the trace stored with the follow-up. `parked` tells a thrown park (no failure) from a failure.
 */
export async function inProcessSpan<T>(
  job: {
    readonly dispatchId: string | undefined;
    readonly traceparent: string | undefined;
    readonly attempt: number;
  },
  parked: (err: unknown) => boolean,
  fn: () => Promise<T>,
): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn();
  const parent = contextOf(job.traceparent, context.active());
  const attributes = {
    ...messaging('process', job.dispatchId ?? ''),
    [SPAN_ATTRIBUTES.attempt]: job.attempt,
  };
  const span = tracer.startSpan(
    SPAN_NAMES.process,
    { kind: SpanKind.CONSUMER, attributes },
    parent,
  );
  return spanning(
    span,
    async () => {
      const result = await context.with(trace.setSpan(parent, span), fn);
      if (typeof result === 'string') span.setAttribute(SPAN_ATTRIBUTES.outcome, result);
      return result;
    },
    (err) => {
      if (parked(err)) span.setAttribute(SPAN_ATTRIBUTES.outcome, 'parked');
      else fail(span, errorTypeOf(err));
    },
  );
}

/**
 * Runs FINISH in the `settle dispatch` span (INTERNAL), a child of the active span (a worker
 * attempt) or else of the follow-up's stored trace (the poller). `fn` gets the traceparent the
 * event carries: the settle span's, or the stored one where this process does not trace. A FINISH
 * that changed nothing (`finished` false) marks its span `unchanged`.
 */
export async function inSettleSpan<T extends { readonly finished: boolean }>(
  record: { readonly dispatchId: string; readonly traceparent?: string | undefined },
  type: string,
  fn: (traceparent: string | undefined) => Promise<T>,
): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn(record.traceparent);
  const active = context.active();
  const parent = trace.getSpan(active) ? active : contextOf(record.traceparent, active);
  const attributes = {
    ...messaging('settle', record.dispatchId),
    [SPAN_ATTRIBUTES.eventType]: type,
  };
  const span = tracer.startSpan(SPAN_NAMES.settle, { attributes }, parent);
  const spanContext = trace.setSpan(parent, span);
  const traceparent = span.isRecording() ? traceparentOf(spanContext) : record.traceparent;
  return spanning(span, async () => {
    const result = await context.with(spanContext, () => fn(traceparent));
    // A FINISH that found the dispatch moved on (ended, or in another state than its caller read)
    // published nothing: its span says so, and the trace's one settlement is the other span.
    if (!result.finished) span.setAttribute(SPAN_ATTRIBUTES.outcome, 'unchanged');
    return result;
  });
}
