import { context, propagation, trace } from '@opentelemetry/api';
import { node, tracing } from '@opentelemetry/sdk-node';
import { createProducer } from '../../src/producer/index.js';
import type { CliProcess } from '../../test/support/cli.js';
import { startOtlpReceiver } from '../../test/support/otlp-receiver.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext } from '../context.js';
import { topCommands } from '../evidence.js';
import { launchRoles, roleEnv } from '../fleet.js';
import { cpuMsOf, probeWork, totalCalls, type ProbeResult } from '../probes.js';
import type { ScenarioRun, ScenarioResult } from '../report.js';
import { num } from '../stats.js';
import { benchSimulator, enqueueOurs, followUps, waitUntil } from '../workload.js';

/**
 * Scenario 8: what tracing costs. The same follow-ups go through enqueue, one worker and one
 * poller twice: with no OTel variable (tracing off, the default) and with OTEL_TRACES_EXPORTER=otlp
 * exporting OTLP/JSON to a receiver in the bench process (the producer traced by an SDK of the
 * bench's own, as a service embedding the library would). Redis commands per follow-up, from INFO
 * commandstats, show that the trace context rides in the commands the hot path already sends.
 */

const POLL = { POLL_INTERVAL: '250ms', POLL_MIN_INTERVAL: '250ms', ACTIVE_GRACE: '20s' };
const WORK_MS = 500;

interface Run {
  readonly enqueue: ProbeResult;
  /** Enqueue to the last event, worker and poller running. */
  readonly whole: ProbeResult;
  /** CPU of the worker and the poller processes over the whole way, ms. */
  readonly rolesCpuMs: number;
  readonly spans: number;
}

/** Registers an SDK in the bench process for the producer's spans; returns its undo. */
function traceProducer(): () => Promise<void> {
  const provider = new node.NodeTracerProvider({
    spanProcessors: [new tracing.SimpleSpanProcessor(new tracing.InMemorySpanExporter())],
  });
  provider.register();
  return async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  };
}

async function runOnce(ctx: BenchContext, n: number, traced: boolean): Promise<Run> {
  const simulator = await benchSimulator({ workTimeMs: WORK_MS });
  const receiver = await startOtlpReceiver();
  const otel: Record<string, string> = traced
    ? {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      }
    : {};
  const untrace = traced ? traceProducer() : async () => {};
  const roles: CliProcess[] = [];
  const measure = (work: () => Promise<unknown>) =>
    probeWork(ctx.admin, [{ label: 'redis-server', pid: ctx.redisPid }], work);
  try {
    // The enqueue alone, where no role runs: its counts are exact.
    const alone = await ctx.fresh(traced ? 'tracing-on' : 'tracing-off');
    const aloneProducer = createProducer({ redisUrl: ctx.redisUrl, prefix: alone.prefix });
    const enqueue = await measure(() => enqueueOurs(aloneProducer, followUps(n, 100)));
    await aloneProducer.close();
    // Then the whole way, with a worker and a poller up before the first follow-up.
    const ns = await ctx.fresh(traced ? 'tracing-on' : 'tracing-off');
    const env = roleEnv(ctx, ns, simulator, { ...POLL, ...otel });
    roles.push(...(await launchRoles(ctx, ns, 'poller', 1, env)));
    roles.push(...(await launchRoles(ctx, ns, 'worker', 1, env)));
    const pids = roles.map((r) => r.child.pid ?? 0);
    const cpuBefore = pids.reduce((a, pid) => a + cpuMsOf(pid), 0);
    const own = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
    const whole = await measure(async () => {
      await enqueueOurs(own, followUps(n, 100));
      await waitUntil(async () => (await ctx.admin.xlen(ns.eventsStream)) >= n, `${n} events`);
    });
    await own.close();
    const rolesCpuMs = pids.reduce((a, pid) => a + cpuMsOf(pid), 0) - cpuBefore;
    await stopAll(roles.splice(0));
    return { enqueue, whole, rolesCpuMs, spans: receiver.spans.length };
  } finally {
    await stopAll(roles);
    await Promise.all([simulator.close(), receiver.close(), untrace()]);
  }
}

const perFollowUp = (probe: ProbeResult, n: number) => totalCalls(probe.commands) / n;
const scriptsPer = (probe: ProbeResult, n: number) =>
  ['evalsha', 'eval'].reduce((a, c) => a + (probe.commands.get(c)?.calls ?? 0), 0) / n;

function report(n: number, off: Run, on: Run): ScenarioResult {
  const ratio = (a: number, b: number) => num(b === 0 ? 0 : a / b, 2);
  const row = (label: string, f: (r: Run) => number, digits = 2) => [
    label,
    num(f(off), digits),
    num(f(on), digits),
    `${ratio(f(on), f(off))}×`,
  ];
  const commandsOff = perFollowUp(off.whole, n);
  const commandsOn = perFollowUp(on.whole, n);
  return {
    title: 'Tracing cost',
    summary:
      `With tracing off (no OTel variable) a follow-up costs ${num(commandsOff)} Redis commands ` +
      `from enqueue to its event; traced (OTLP), ${num(commandsOn)} ` +
      `(${ratio(commandsOn, commandsOff)}×): the traceparent rides in REGISTER and the job add. ` +
      `Worker + poller CPU per follow-up: ${num(off.rolesCpuMs / n, 2)} ms off, ` +
      `${num(on.rolesCpuMs / n, 2)} ms traced.`,
    setup:
      `${num(n)} follow-ups over 100 projects, enqueued by sendMany of 100 with no role running ` +
      '(the enqueue row), then again into a fresh prefix, sent and tracked to their events by one ' +
      `worker and one poller process started before (runs last ${WORK_MS} ms; ` +
      'POLL_INTERVAL and POLL_MIN_INTERVAL 250ms), once with no OTel variable and once with ' +
      'OTEL_TRACES_EXPORTER=otlp, OTEL_EXPORTER_OTLP_PROTOCOL=http/json to a receiver in the bench ' +
      'process; the traced run also traces the producer with an SDK in the bench process. Redis ' +
      'commands from INFO commandstats (commands inside Lua scripts count too). Measured once.',
    tables: [
      {
        columns: ['per follow-up', 'tracing off', 'traced (OTLP)', 'traced / off'],
        rows: [
          row('Redis commands: enqueue', (r) => perFollowUp(r.enqueue, n)),
          row('of which script calls (EVALSHA/EVAL)', (r) => scriptsPer(r.enqueue, n)),
          row('Redis commands: enqueue to event', (r) => perFollowUp(r.whole, n)),
          row('of which script calls (EVALSHA/EVAL)', (r) => scriptsPer(r.whole, n)),
          row('worker + poller CPU (ms)', (r) => r.rolesCpuMs / n),
          row('spans received', (r) => r.spans / n),
        ],
      },
    ],
    limitedBy: [
      `tracing off, enqueue to event: ${topCommands(off.whole.commands, n, 30)}`,
      `traced, enqueue to event: ${topCommands(on.whole.commands, n, 30)}`,
    ],
    notes: [
      'The enqueue-to-event period includes fixed costs (BullMQ heartbeats, poll ticks with nothing ' +
        'due) and status reads whose number depends on timing (a busier process reads a run a ' +
        'little more often: an HMGET, a ZADD and an HSET per read), spread over the follow-ups, so it ' +
        'differs a little between runs, traced or not. The enqueue phase has none: its counts are ' +
        'exact, and the same traced or not.',
      'Without any OTel variable the SDK is not loaded and every span call is a no-op of the ' +
        'OpenTelemetry API; the trace context is an empty argument of REGISTER and no field of ' +
        'the job, so the hot path sends the same commands as before tracing existed ' +
        '(test/producer: one MULTI/EXEC for a batch, counted with MONITOR).',
    ],
  };
}

/** The scenario's run (registered in run.ts). */
export const tracingScenario: ScenarioRun = async (ctx, n) => {
  const off = await runOnce(ctx, n, false);
  ctx.progress('tracing', 'tracing off: done');
  const on = await runOnce(ctx, n, true);
  ctx.progress('tracing', 'traced: done');
  return report(n, off, on);
};
