import {
  context,
  isSpanContextValid,
  ProxyTracerProvider,
  trace,
  TraceFlags,
  type Context,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';

/**
 * The trace context of a follow-up travels as a W3C `traceparent` string, stored in its dispatch
 * record (and the BullMQ job's ids-only payload), so every attempt, status read and the event of
 * one follow-up join the producer's trace. It is written here, not by the global propagator:
 * the record's field is a W3C traceparent whatever `OTEL_PROPAGATORS` says. The spans that join
 * it are `tracing.ts` and the agent-API client's `http-span.ts`, each made only when a tracer is
 * registered at all ({@link activeTracer}).
 */

/** The name of the service's tracer. */
export const TRACER_NAME = 'agent-dispatch';

/**
 * The tracer of the registered tracer provider (our SDK, or the library caller's); `undefined`
 * when none is registered. Then every span would be a no-op, so the worker's and poller's hot
 * paths skip building them: their attributes, URL and context switch would cost CPU for nothing.
 * The stored `traceparent` still travels (records, events, the intake's header), which needs no
 * span.
 */
export function activeTracer(): Tracer | undefined {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider
    ? provider.getDelegateTracer(TRACER_NAME)
    : provider.getTracer(TRACER_NAME);
}

/** A W3C `traceparent` of version 00, as stored and accepted (lowercase hex). */
export const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The W3C `traceparent` of the span active in `ctx`, or `undefined` when there is none. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const span = trace.getSpanContext(ctx);
  if (!span || !isSpanContextValid(span)) return undefined;
  const flags = (span.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `00-${span.traceId}-${span.spanId}-${flags}`;
}

/** `base` continuing `traceparent` (a remote parent); `base` when it is absent or malformed. */
export function contextOf(
  traceparent: string | undefined,
  base: Context = context.active(),
): Context {
  const match = traceparent === undefined ? null : TRACEPARENT.exec(traceparent.trim());
  if (!match) return base;
  const parent: SpanContext = {
    traceId: match[1] as string,
    spanId: match[2] as string,
    traceFlags: parseInt(match[3] as string, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  return isSpanContextValid(parent) ? trace.setSpanContext(base, parent) : base;
}

/** Runs `fn` with the follow-up's stored trace context active (e.g. a status read). */
export function withTraceparent<T>(traceparent: string | undefined, fn: () => T): T {
  return context.with(contextOf(traceparent), fn);
}
