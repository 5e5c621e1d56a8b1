import { context, propagation, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { node, tracing } from '@opentelemetry/sdk-node';
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { readDispatchJob } from '../../src/consumer/worker.js';
import { contextOf, traceparentOf } from '../../src/telemetry/trace-context.js';
import { startTestServer } from '../http/fixture.js';
import { useNamespace } from '../support/namespace.js';

/**
 * Trace context at the edges, in this process: the library's caller's active span is the parent
 * of `send dispatch`, the intake continues an incoming `traceparent` header, and the context
 * written to the record and the BullMQ payload is the send span's. The caller's own SDK is what
 * a service embedding the library would register.
 */

const TOKEN = 'intake-token-for-tracing-tests';
const exporter = new tracing.InMemorySpanExporter();
const provider = new node.NodeTracerProvider({
  spanProcessors: [new tracing.SimpleSpanProcessor(exporter)],
});

describe('trace context at the edges', () => {
  const ns = useNamespace('tracing', { scope: 'all' });
  beforeAll(() => {
    provider.register();
  });
  afterEach(() => exporter.reset());
  afterAll(async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });

  /** The traceparent on the record and on the BullMQ job's payload of `dispatchId`. */
  async function storedTraceparents(dispatchId: string): Promise<(string | undefined)[]> {
    const connection = ns().redis.duplicate();
    const queue = new Queue(QUEUE_NAMES.dispatch, { connection, prefix: ns().prefix });
    try {
      const record = await ns().redis.hget(
        keysFor(ns().prefix).dispatch(dispatchId),
        'traceparent',
      );
      const job = await queue.getJob(dispatchId);
      return [record ?? undefined, job ? readDispatchJob(job)?.traceparent : undefined];
    } finally {
      await queue.close();
      connection.disconnect();
    }
  }

  it("makes the library caller's active span the parent of each send dispatch", async () => {
    const producer = createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix });
    try {
      const tracer = trace.getTracer('caller');
      const [caller, results] = await tracer.startActiveSpan('caller', async (span) => {
        const sent = await producer.sendMany([
          { projectId: 'p', jobId: 'a', prompt: 'one' },
          { projectId: 'p', jobId: 'b', prompt: 'two' },
        ]);
        span.end();
        return [span.spanContext(), sent] as const;
      });
      const sends = exporter.getFinishedSpans().filter((s) => s.name === 'send dispatch');
      expect(sends).toHaveLength(2);
      for (const [i, { dispatchId }] of results.entries()) {
        const span = sends.find((s) => s.attributes['messaging.message.id'] === dispatchId);
        if (!span) throw new Error(`no send dispatch span for ${dispatchId}`);
        expect(span.kind).toBe(SpanKind.PRODUCER);
        expect(span.spanContext().traceId).toBe(caller.traceId);
        expect(span.parentSpanContext?.spanId).toBe(caller.spanId);
        expect(span.attributes).toMatchObject({
          'messaging.system': 'bullmq',
          'messaging.destination.name': 'dispatch',
          'messaging.operation.type': 'send',
        });
        const expected = `00-${caller.traceId}-${span.spanContext().spanId}-01`;
        expect(await storedTraceparents(dispatchId), `follow-up ${i}`).toEqual([
          expected,
          expected,
        ]);
      }
    } finally {
      await producer.close();
    }
  });

  it('continues the traceparent header a client sends to the intake', async () => {
    const app = await startTestServer(ns().config({ INTAKE_TOKEN: TOKEN }), { withProducer: true });
    try {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const parentId = '00f067aa0ba902b7';
      const response = await fetch(`${app.url}/v1/followups`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKEN}`,
          'content-type': 'application/json',
          traceparent: `00-${traceId}-${parentId}-01`,
        },
        body: JSON.stringify({ projectId: 'p', jobId: 'intake', prompt: 'over HTTP' }),
      });
      expect(response.status).toBe(202);
      const { dispatchId } = (await response.json()) as { dispatchId: string };
      const [send] = exporter.getFinishedSpans().filter((s) => s.name === 'send dispatch');
      expect(send?.spanContext().traceId).toBe(traceId);
      expect(send?.parentSpanContext?.spanId).toBe(parentId);
      const [record] = await storedTraceparents(dispatchId);
      expect(record).toBe(`00-${traceId}-${send?.spanContext().spanId}-01`);
    } finally {
      await app.close();
    }
  });

  it('reads and writes W3C traceparents, and ignores malformed ones', () => {
    const stored = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(traceparentOf(contextOf(stored, ROOT_CONTEXT))).toBe(stored);
    for (const bad of ['', 'junk', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'])
      expect(traceparentOf(contextOf(bad, ROOT_CONTEXT)), bad).toBeUndefined();
    // A payload with a malformed one is still a job: the field is dropped, not the follow-up.
    const data = { p: 'p', j: 'j', t: 'junk' };
    const ref = { dispatchId: 'd', projectId: 'p', jobId: 'j', traceparent: undefined };
    expect(readDispatchJob({ id: 'd', data })).toEqual(ref);
  });
});
