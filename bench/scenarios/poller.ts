import { SETTINGS } from '../../src/config/settings.js';
import type { ScenarioResult, ScenarioRun } from '../report.js';
import { describeCpu, topCommands } from '../evidence.js';
import { totalCalls } from '../probes.js';
import { ms, num, percentile, repeated, runs, type Repeated } from '../stats.js';
import { ACTIVE_GRACE_MS, measurePoller, WORKERS, type PollerRun } from './poller-run.js';

/**
 * Scenario 5: what tracking costs. Follow-ups are sent in a burst and their runs last 2 to 5 s;
 * one poller process reads their status until each ends and publishes its event. Measured: GETs
 * per follow-up, Redis commands per tick and per status read, poller CPU per 1,000 status reads,
 * and the time from a run ending in the simulator to its event on the stream.
 */

/** p50 / p99 of some follow-ups' latencies, and how many they are. */
const split = (latencies: readonly number[]) =>
  `${ms(percentile(latencies, 50))} / ${ms(percentile(latencies, 99))} (${num(latencies.length, 0)} follow-ups)`;

function rows(r: PollerRun): string[][] {
  const trackingCalls = totalCalls(r.tracking.commands);
  const trackingReads = Math.max(1, r.gets - r.getsWhileSending);
  const ticks = (t: { ran: number; skipped: number }) => Math.max(1, t.ran + t.skipped);
  return [
    ['follow-ups tracked', num(r.n)],
    ['GETs per completed follow-up', num(r.gets / r.n, 2)],
    ['poller CPU per 1,000 status reads', `${num(r.pollerCpuMs / (r.gets / 1000))} ms`],
    ['Redis commands per status read (after the last send)', num(trackingCalls / trackingReads, 2)],
    [
      'Redis commands per poll tick (after the last send)',
      num(trackingCalls / ticks(r.trackingTicks)),
    ],
    [
      'Redis commands per poll tick with nothing due',
      num(totalCalls(r.idle.commands) / ticks(r.idleTicks)),
    ],
    ['run end → event on the stream, p50', ms(percentile(r.latencies, 50))],
    ['run end → event on the stream, p99', ms(percentile(r.latencies, 99))],
    ['run end → event on the stream, max', ms(Math.max(...r.latencies))],
    [
      "run end as the simulator's timer fired → event, p50 / p99",
      `${ms(percentile(r.firedLatencies, 50))} / ${ms(percentile(r.firedLatencies, 99))}`,
    ],
    [
      'run end → event, p50 / p99, of the agent runs that ended while sends went on',
      split(r.byPhase.whileSending),
    ],
    [
      'run end → event, p50 / p99, of the agent runs that ended after the last send',
      split(r.byPhase.afterSends),
    ],
    [
      'follow-ups that waited out ACTIVE_GRACE (their GETs)',
      `${num(r.graceEnded, 0)} (${num(r.graceGets, 0)})`,
    ],
    [
      'ticks after the last send: ran / skipped (lock held)',
      `${r.trackingTicks.ran} / ${r.trackingTicks.skipped}`,
    ],
  ];
}

/**
 * Which agent runs make the tail: of the follow-ups at or above the p99, how many ended while
 * follow-ups were still being sent, and how many after the last send.
 */
function tail(r: PollerRun): string {
  const { whileSending, afterSends } = r.byPhase;
  if (r.latencies.length === 0) return 'No event was measured.';
  const p99 = percentile(r.latencies, 99);
  const [during, after] = [whileSending, afterSends].map((l) => l.filter((x) => x >= p99).length);
  const figures =
    `of the follow-ups at or above the p99 (${ms(p99)}), ${num(during ?? 0, 0)} ended while ` +
    `follow-ups were still being sent and ${num(after ?? 0, 0)} after the last send`;
  if ((during ?? 0) <= (after ?? 0)) return `The tail does not come from the burst: ${figures}.`;
  return (
    `The tail comes from the burst: ${figures}. While sending, the poller shares the cores with ` +
    'the workers, Redis and the bench (next line), so its reads fall behind their schedule: each ' +
    'follow-up is read less often than the schedule asks, and an agent run that ends is seen later.'
  );
}

function report(measured: Repeated<PollerRun>): ScenarioResult {
  const r = measured.typical;
  const readsWhileSending = (r.getsWhileSending * 1000) / r.sending.wallMs;
  const readsTracking = ((r.gets - r.getsWhileSending) * 1000) / r.tracking.wallMs;
  return {
    title: 'Poller cost',
    summary:
      `${num(r.gets / r.n, 2)} GETs per follow-up, ${num(r.pollerCpuMs / (r.gets / 1000))} ms of ` +
      `poller CPU per 1,000 status reads, run end to event p50 ${ms(percentile(r.latencies, 50))}, ` +
      `p99 ${ms(percentile(r.latencies, 99))} for ${num(r.n)} follow-ups sent in a burst; ` +
      `${num(r.graceEnded, 0)} waited out ACTIVE_GRACE.`,
    setup:
      `${num(r.n)} follow-ups (one per agent job, 100 projects) sent in a burst by ${WORKERS} worker ` +
      'processes; the simulator runs each for a random 2–5 s; one poller process (`src/cli.ts ' +
      'poller`, POLL_INTERVAL=250ms, POLL_MIN_INTERVAL=250ms, POLL_MAX_INTERVAL=5s, ' +
      `ACTIVE_GRACE=${ACTIVE_GRACE_MS / 1000}s to bound the run, other settings default) tracks ` +
      'them all to their terminal events. Per tick and per read figures are counted after the last ' +
      'send, with the workers stopped, so only the poller talks to Redis; then 3 s with nothing due. ' +
      'The repeat of median p99 of those listed in the notes.',
    tables: [{ columns: ['figure', 'value'], rows: rows(r) }],
    limitedBy: [
      tail(r),
      `While sending: ${describeCpu(r.sending)}; ${num(readsWhileSending)} status reads/s.`,
      `After the last send (poller alone): ${describeCpu(r.tracking)}; ${num(readsTracking)} ` +
        `status reads/s, with at most POLL_CONCURRENCY (${SETTINGS.POLL_CONCURRENCY.default}) reads in flight, each a GET then a ` +
        "RESCHEDULE or FINISH in turn (those of the reads that end in the same turn of the poller's " +
        'event loop share one script call). Redis commands per tick: ' +
        topCommands(r.tracking.commands, Math.max(1, r.trackingTicks.ran)),
      `Nothing due: ${describeCpu(r.idle)}. Commands per idle tick: ` +
        topCommands(r.idle.commands, Math.max(1, r.idleTicks.ran + r.idleTicks.skipped)),
    ],
    notes: [
      `Per repeat of the scenario, run end → event p99: ${runs(measured.values, ms)}; poller CPU ` +
        `per 1,000 status reads in the median repeat ${num(r.pollerCpuMs / (r.gets / 1000))} ms.`,
      "Run end = the simulator's send time + its random work time (recorded by the bench's " +
        'workTimeMs callback); event time = the stream entry id. Part of the latency is the ' +
        'backed-off read schedule (×1.5 per read from 250 ms up to 1 s in the first 5 s after ' +
        'the send, then ×2 up to 5 s), by design: fewer reads for long runs.',
      'Waited out ACTIVE_GRACE: events whose finishedAt − sentAt is at least the grace. Their runs ' +
        'were active when sent (the POST answer says so), yet the poller lost that mark and kept ' +
        'reading the terminal status until the grace passed (a stale-snapshot race in the poll tick).',
    ],
  };
}

/** The scenario's run (registered in run.ts). */
export const pollerScenario: ScenarioRun = async (ctx, n) =>
  report(
    await repeated(
      ctx.repeats,
      async (run) => {
        const measured = await measurePoller(ctx, n);
        const p99 = percentile(measured.latencies, 99);
        const fired = percentile(measured.firedLatencies, 99);
        ctx.progress(
          'poller',
          `run ${run + 1}: run end → event p99 ${ms(p99)} (${ms(fired)} fired)`,
        );
        return measured;
      },
      (measured) => percentile(measured.latencies, 99),
      ctx.mayRepeat,
    ),
  );
