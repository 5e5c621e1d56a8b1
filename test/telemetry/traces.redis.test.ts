import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { runCliToEnd } from '../support/cli.js';
import { readEvents } from '../support/events.js';
import { fleetEnv, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import {
  SPAN_KIND,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../support/otlp-receiver.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

/**
 * Traces end to end: `enqueue`, a worker and a poller as processes exporting OTLP/JSON to a
 * receiver of the test's own. Every follow-up is one trace across the three processes, and the
 * event carries its trace context. Without OTEL_TRACES_EXPORTER nothing is exported or stored.
 */

const N = 20;
/** The simulator's draw for the status of an injected 5xx: ≥ 2/3 picks 503 (see faults.ts). */
const PICK_503 = 0.9;

describe('OpenTelemetry traces', () => {
  // Every draw is 0.9: with serverErrorRate 1 every request is a 503, with 0 none is.
  const simulator = useSimulator({ workTimeMs: 200, random: () => PICK_503 });
  const fleet = useFleet('traces', simulator);
  let receiver: OtlpReceiver;
  let dir: string;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-traces-'));
  });
  afterAll(async () => {
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Enqueues N follow-ups (one per agent job) with the CLI; their dispatch ids, in order. */
  async function enqueue(env: Record<string, string>, name: string): Promise<string[]> {
    const lines = Array.from({ length: N }, (_, i) => {
      simulator().seedJob('proj', `${name}-${i}`);
      return JSON.stringify({ projectId: 'proj', jobId: `${name}-${i}`, prompt: `#${i}` });
    });
    const file = join(dir, `${name}.ndjson`);
    writeFileSync(file, lines.join('\n'));
    const result = await runCliToEnd(['enqueue', '--file', file], env);
    expect(result.code, result.stderr).toBe(0);
    return result.stdout
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { dispatchId: string }).dispatchId);
  }

  /** Starts one worker and one poller process with `env` and waits until both are up. */
  async function startFleet(env: Record<string, string>): Promise<void> {
    const { ns } = fleet();
    const workers = startRoles('worker', 1, env);
    const pollers = startRoles('poller', 1, env);
    fleet().processes.push(...workers, ...pollers);
    await waitForWorkers(ns, 1, { processes: workers, timeoutMs: 45_000 });
    await waitForWorkers(ns, 1, { queue: 'poll', processes: pollers, timeoutMs: 45_000 });
  }

  it('makes each follow-up one trace across enqueue, worker and poller, retries included', async () => {
    const { ns } = fleet();
    const env = {
      ...fleetEnv(ns, simulator()),
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_SERVICE_NAME: 'dispatch-test',
      LOG_LEVEL: 'info',
    };
    // Every send is answered 503 until the first one was; then the API recovers.
    simulator().setFaults({ serverErrorRate: 1 });
    await startFleet(env);
    for (const role of fleet().processes) expect(role.output.stdout).toContain('tracing:started');
    const ids = await enqueue(env, 'traced');
    await eventually(
      () => simulator().requests.some((r) => r.kind === 'send' && r.status === 503) || undefined,
      { timeoutMs: 30_000, what: 'a send answered 503' },
    );
    simulator().setFaults({ serverErrorRate: 0 });
    await fleet().events(N, 90_000);
    const events = await readEvents(ns.redis, ns.eventsStream);
    const settled = (id: string) =>
      receiver.spans.some((s) => s.name === 'settle dispatch' && messageId(s) === id);
    await eventually(() => ids.every(settled) || undefined, {
      timeoutMs: 30_000,
      what: 'the settle span of every follow-up',
    });

    const retried = new Set(
      simulator()
        .requests.filter((r) => r.kind === 'send' && r.status === 503)
        .map((r) => r.jobId),
    );
    expect(retried.size).toBeGreaterThan(0);
    for (const [i, id] of ids.entries()) {
      const [send, ...sends] = receiver.spans.filter(
        (s) => s.name === 'send dispatch' && messageId(s) === id,
      );
      expect(sends, id).toEqual([]);
      if (!send) throw new Error(`no send dispatch span for ${id}`);
      expect(send.kind).toBe(SPAN_KIND.producer);
      expectMessaging(send, 'send', id);
      const trace = receiver.spans.filter((s) => s.traceId === send.traceId);
      // Three processes: enqueue, the worker and the poller, each with its resource.
      const pids = new Set(trace.map((s) => s.resource['process.pid']));
      expect(pids.size, id).toBeGreaterThanOrEqual(3);
      for (const span of trace) {
        expect(span.resource['service.name']).toBe('dispatch-test');
        // The command line is left out: `enqueue --prompt TEXT` would export the prompt.
        expect(span.resource['process.command_args']).toBeUndefined();
      }

      const attempts = trace.filter((s) => s.name === 'process dispatch');
      for (const attempt of attempts) {
        expect(attempt.kind).toBe(SPAN_KIND.consumer);
        expect(attempt.parentSpanId).toBe(send.spanId);
        expectMessaging(attempt, 'process', id);
      }
      const posts = trace.filter((s) => s.kind === SPAN_KIND.client && s.name.startsWith('POST '));
      for (const post of posts) {
        expect(attempts.map((a) => a.spanId)).toContain(post.parentSpanId);
        expect(post.attributes['http.request.method']).toBe('POST');
        expect(post.attributes['url.full']).toBe(
          `${simulator().url}/v2/agent/proj/job/traced-${i}/message`,
        );
      }
      expect(posts.map((p) => p.attributes['http.response.status_code'])).toContain(200);
      const gets = trace.filter((s) => s.kind === SPAN_KIND.client && s.name.startsWith('GET '));
      expect(gets.length, id).toBeGreaterThan(0);
      for (const get of gets) expect(get.parentSpanId).toBe(send.spanId);

      // One FINISH settled it. A poller read whose record moved on meanwhile (a late answer
      // turned `unsettled` into `sent`) may have run one more, which changed nothing and says so.
      const settles = trace.filter((s) => s.name === 'settle dispatch');
      const settle = settles.filter((s) => s.attributes['agent_dispatch.outcome'] !== 'unchanged');
      expect(settle, id).toHaveLength(1);
      expect(settles.length, id).toBeLessThanOrEqual(2);
      expectMessaging(settle[0] as ReceivedSpan, 'settle', id);
      expect(settle[0]?.parentSpanId).toBe(send.spanId);
      const event = events.find((e) => e.dispatchId === id);
      expect(event?.traceparent).toBe(`00-${send.traceId}-${settle[0]?.spanId}-01`);

      if (retried.has(`traced-${i}`)) {
        // Both attempts are in the trace: the first failed on the 503, the second sent.
        expect(attempts.length, id).toBeGreaterThanOrEqual(2);
        const failed = posts.filter((p) => p.attributes['http.response.status_code'] === 503);
        expect(failed.length).toBeGreaterThan(0);
        for (const post of failed) {
          expect(post.attributes['error.type']).toBe('503');
          expect(post.statusCode).toBe(2);
        }
        expect(attempts.filter((a) => a.attributes['error.type'] === 'server').length).toBe(
          failed.length,
        );
      } else {
        expect(attempts, id).toHaveLength(1);
      }
    }
  }, 180_000);

  it('without OTEL_TRACES_EXPORTER exports nothing and stores no trace context', async () => {
    const { ns } = fleet();
    const before = receiver.requests;
    // The endpoint alone does not turn tracing on.
    const env = {
      ...fleetEnv(ns, simulator()),
      LOG_LEVEL: 'info',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    };
    await startFleet(env);
    const ids = await enqueue(env, 'untraced');
    await fleet().events(N, 90_000);
    const keys = keysFor(ns.prefix);
    const records = await Promise.all(
      ids.map((id) => ns.redis.hget(keys.dispatch(id), 'traceparent')),
    );
    // Nor does the BullMQ job's payload carry one.
    const connection = ns.redis.duplicate();
    const queue = new Queue(QUEUE_NAMES.dispatch, { connection, prefix: ns.prefix });
    const jobs = await Promise.all(ids.map((id) => queue.getJob(id)));
    await queue.close();
    connection.disconnect();
    expect(jobs.map((job) => (job ? Object.keys(job.data).sort() : 'no job'))).toEqual(
      ids.map(() => ['j', 'p']),
    );
    expect(records).toEqual(ids.map(() => null));
    const events = await readEvents(ns.redis, ns.eventsStream);
    expect(events.map((e) => e.traceparent)).toEqual(ids.map(() => undefined));
    const logs = fleet()
      .processes.map((p) => p.output.stdout)
      .join('\n');
    expect(logs).toContain('role:started');
    expect(logs).not.toContain('tracing:started');
    // Stopped now, so that anything buffered would have been flushed to the receiver.
    await stopAll(fleet().processes.splice(0));
    expect(receiver.requests).toBe(before);
  }, 180_000);
});

function messageId(span: ReceivedSpan): unknown {
  return span.attributes['messaging.message.id'];
}

function expectMessaging(span: ReceivedSpan, operation: string, id: string): void {
  expect(span.attributes).toMatchObject({
    'messaging.system': 'bullmq',
    'messaging.destination.name': 'dispatch',
    'messaging.operation.type': operation,
    'messaging.message.id': id,
  });
}
