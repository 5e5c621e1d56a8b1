import { createProducer } from '../../src/producer/index.js';
import type { CliProcess } from '../../test/support/cli.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext, Namespace } from '../context.js';
import { topCommands } from '../evidence.js';
import { launchRoles, roleEnv, startBaseline } from '../fleet.js';
import { probeWork, totalCalls, type ProbeResult } from '../probes.js';
import type { ScenarioRun, ScenarioResult } from '../report.js';
import { baselineRetained, oursRetained } from '../retained.js';
import { timeScripts, type ScriptTimes, type TimedRun } from '../script-time.js';
import { num, repeatedPairs, runs, type Side } from '../stats.js';
import { baselineQueue, benchSimulator, followUps, waitUntil } from '../workload.js';
import { enqueueBaseline, enqueueOurs } from '../workload.js';

/**
 * Scenario 7: Redis work per follow-up, from INFO commandstats (which counts the commands that
 * Lua scripts run, too) and the redis-server's CPU time, ours beside the baseline. Ours runs its
 * phases one after another so each one's share is clear: enqueue, then a worker sends all, then
 * a poller tracks all to their events. A second run has worker and poller together, as in
 * production, where a follow-up is read more than once.
 */

/** As in scenario 5; ACTIVE_GRACE bounds the run when a seen-active mark is lost (see there). */
const POLL = {
  POLL_INTERVAL: '250ms',
  POLL_MIN_INTERVAL: '250ms',
  POLL_MAX_INTERVAL: '5s',
  ACTIVE_GRACE: '20s',
};
const WORK_MS = 1_000;

/** Measures `work` with Redis as the only watched process; drops the bench's own commands. */
function phase(ctx: BenchContext, work: () => Promise<unknown>): Promise<ProbeResult> {
  return probeWork(ctx.admin, [{ label: 'redis-server', pid: ctx.redisPid }], work);
}

/** Looks at the namespace once every follow-up of a run has ended (outside the measured periods). */
type AfterRun = (ns: Namespace) => Promise<void>;

async function ours(
  ctx: BenchContext,
  n: number,
  together: boolean,
  after?: AfterRun,
): Promise<ProbeResult[]> {
  const ns = await ctx.fresh('redis-work');
  const simulator = await benchSimulator({ workTimeMs: WORK_MS });
  const env = roleEnv(ctx, ns, simulator, POLL);
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const roles: CliProcess[] = [];
  const events = async () => (await ctx.admin.xlen(ns.eventsStream)) >= n;
  try {
    if (together) {
      roles.push(...(await launchRoles(ctx, ns, 'poller', 1, env)));
      roles.push(...(await launchRoles(ctx, ns, 'worker', 1, env)));
      return [
        await phase(ctx, async () => {
          await enqueueOurs(producer, followUps(n, 100));
          await waitUntil(events, `${n} events`, 120_000, 50);
        }),
      ];
    }
    const enqueue = await phase(ctx, () => enqueueOurs(producer, followUps(n, 100)));
    const send = await phase(ctx, async () => {
      roles.push(...(await launchRoles(ctx, ns, 'worker', 1, env)));
      await waitUntil(() => simulator.deliveries.length >= n, `${n} deliveries`, 120_000, 20);
      await new Promise((r) => setTimeout(r, 300)); // the last MARK_SENT and job completions
      await stopAll(roles.splice(0));
    });
    await new Promise((r) => setTimeout(r, WORK_MS)); // every run has ended
    const track = await phase(ctx, async () => {
      roles.push(...(await launchRoles(ctx, ns, 'poller', 1, env)));
      await waitUntil(events, `${n} events`, 120_000, 50);
    });
    await stopAll(roles.splice(0));
    await after?.(ns);
    return [enqueue, send, track];
  } finally {
    await stopAll(roles);
    await Promise.all([producer.close(), simulator.close()]);
  }
}

async function baseline(ctx: BenchContext, n: number, after?: AfterRun): Promise<ProbeResult[]> {
  const ns = await ctx.fresh('redis-work');
  const simulator = await benchSimulator({ workTimeMs: WORK_MS });
  const queue = baselineQueue(ctx, ns);
  const roles: CliProcess[] = [];
  try {
    const enqueue = await phase(ctx, () => enqueueBaseline(queue, followUps(n, 100)));
    const processed = await phase(ctx, async () => {
      roles.push(...(await startBaseline(ctx, ns, simulator, 1, 64)));
      await waitUntil(() => simulator.deliveries.length >= n, `${n} deliveries`, 120_000, 20);
      await new Promise((r) => setTimeout(r, 300)); // the last jobs' moveToFinished
      await stopAll(roles.splice(0));
    });
    await after?.(ns);
    return [enqueue, processed];
  } finally {
    await stopAll(roles);
    await Promise.all([queue.close(), simulator.close()]);
  }
}

/** One table row: commands, script calls and Redis CPU, each per follow-up. */
function row(label: string, probe: ProbeResult, n: number): string[] {
  const scripts = ['evalsha', 'eval'].reduce((a, c) => a + (probe.commands.get(c)?.calls ?? 0), 0);
  const redisMs = probe.cpu[0]?.cpuMs ?? 0;
  return [
    label,
    num(totalCalls(probe.commands) / n, 1),
    num(scripts / n, 2),
    num(probe.reads / n, 1),
    num((redisMs * 1000) / n),
  ];
}

const COLUMNS = [
  '',
  'Redis commands per follow-up',
  'of which script calls (EVALSHA/EVAL)',
  'round trips: socket reads by Redis',
  'redis-server CPU per follow-up (µs)',
];

/** Ours (all roles together) against the baseline (enqueue + process), per follow-up. */
function summary(n: number, periods: Periods): string {
  const per = (probes: readonly ProbeResult[]) => {
    const calls = probes.reduce((a, p) => a + totalCalls(p.commands), 0) / n;
    const redisUs = (probes.reduce((a, p) => a + (p.cpu[0]?.cpuMs ?? 0), 0) * 1000) / n;
    return { calls, redisUs };
  };
  const ours = per(periods.filter(([l]) => l.includes('together')).map(([, p]) => p));
  const base = per(periods.filter(([l]) => l.startsWith('baseline')).map(([, p]) => p));
  return (
    `A dispatched and tracked follow-up costs ${num(ours.calls)} Redis commands and ` +
    `${num(ours.redisUs)} µs of redis-server CPU, against ${num(base.calls)} and ` +
    `${num(base.redisUs)} µs for the baseline's add + process: ${num(ours.redisUs / base.redisUs, 2)}× ` +
    'the Redis CPU. The breakdown by command, per follow-up:'
  );
}

/** Every measured period, labelled, in table order. */
type Periods = readonly (readonly [string, ProbeResult])[];

/** Redis CPU of a run's probes, in µs. */
const cpuUs = (probes: readonly ProbeResult[]) =>
  probes.reduce((a, p) => a + (p.cpu[0]?.cpuMs ?? 0), 0) * 1000;

/**
 * Script time per follow-up, ours (all roles together) beside the baseline, by script, with what
 * logging every command cost: the timed run's Redis CPU against the untimed run of the same work
 * (`untimed`), per logged entry.
 */
function scriptTable(
  n: number,
  timed: { ours: TimedRun<ProbeResult[]>; base: TimedRun<ProbeResult[]> },
  untimed: ProbeResult,
) {
  const [ours, base] = [timed.ours.times, timed.base.times];
  const names = [...new Set([...ours.keys(), ...base.keys()])];
  const total = (times: ScriptTimes) => [...times.values()].reduce((a, t) => a + t.us, 0);
  const usOf = (times: ScriptTimes, name: string) => times.get(name)?.us ?? 0;
  const cells = (time: { calls: number; us: number; commands: number } | undefined) =>
    time
      ? [num(time.calls / n, 2), num(time.us / n, 1), num(time.commands / time.calls, 1)]
      : ['', '', ''];
  const rows = names
    .map((name) => ({ name, us: usOf(ours, name) + usOf(base, name) }))
    .filter(({ us }) => us / n >= 0.05)
    .sort((a, b) => b.us - a.us)
    .map(({ name }) => [name, ...cells(ours.get(name)), ...cells(base.get(name)).slice(0, 2)]);
  const sum = (times: ScriptTimes, side: string) =>
    [...times].filter(([name]) => name.startsWith(side)).reduce((a, [, t]) => a + t.us, 0) / n;
  const perEntryUs = (cpuUs(timed.ours.result) - cpuUs([untimed])) / timed.ours.logged;
  return {
    table: {
      columns: [
        'script',
        'ours: calls per follow-up',
        'ours: µs per follow-up',
        'ours: commands it runs per call',
        'baseline: calls per follow-up',
        'baseline: µs per follow-up',
      ],
      rows: [
        ...rows,
        ['every script', '', num(total(ours) / n, 1), '', '', num(total(base) / n, 1)],
      ],
    },
    line:
      `Time inside scripts per follow-up (SLOWLOG, a run of its own): ours ${num(total(ours) / n, 1)} µs, ` +
      `of which BullMQ's own scripts ${num(sum(ours, 'BullMQ'), 1)} µs and ours ` +
      `${num(sum(ours, 'ours'), 1)} µs; baseline ${num(total(base) / n, 1)} µs. Logging every ` +
      `command cost Redis about ${num(perEntryUs, 1)} µs per logged command (the timed run's CPU ` +
      `against the untimed one's, over its ${num(timed.ours.logged)} entries), and a script's time ` +
      'holds that cost once for each command it runs (the column above): compare scripts with ' +
      'that in mind.',
  };
}

function report(
  n: number,
  periods: Periods,
  scripts: { ours: TimedRun<ProbeResult[]>; base: TimedRun<ProbeResult[]> },
  together: ProbeResult,
  cpuRuns: { ours: readonly number[]; baseline: readonly number[] },
): ScenarioResult {
  const byScript = scriptTable(n, scripts, together);
  return {
    title: 'Redis work per follow-up',
    summary: summary(n, periods).replace(' The breakdown by command, per follow-up:', ''),
    setup:
      `${num(n)} follow-ups, one per agent job, over 100 projects; INFO commandstats (commands run ` +
      'inside Lua scripts count too, and each script call counts once more as EVALSHA) and the ' +
      "redis-server process's CPU time, before and after. Ours runs phase by phase (enqueue; one " +
      'worker sends all; one poller tracks all to their events), then again with worker and poller ' +
      `together (simulator runs last ${WORK_MS} ms; POLL_INTERVAL and POLL_MIN_INTERVAL 250ms, ` +
      'ACTIVE_GRACE 20s). Baseline: addBulk, then one bare BullMQ worker that POSTs. Ours phase by ' +
      'phase is measured once (command counts barely vary between runs); ours with all roles ' +
      'together and the baseline run in pairs, and each is the run of median Redis CPU of those listed in the ' +
      'notes (the CPU moves more between runs than the command counts do). The second table times each script (ours and ' +
      "BullMQ's) in one more run of each side with every command logged with its duration " +
      "(SLOWLOG at 0 µs; a script's time includes the commands it runs, each of them logged too, " +
      "inside the script's time; that run's CPU is compared with the untimed run's only to tell " +
      'what the logging cost). The round trips column counts the socket reads Redis served (INFO ' +
      'stats `total_reads_processed`): a client that sends several commands at once costs one.',
    tables: [
      { columns: COLUMNS, rows: periods.map(([label, probe]) => row(label, probe, n)) },
      byScript.table,
    ],
    limitedBy: [
      summary(n, periods),
      byScript.line,
      ...periods.map(([label, probe]) => `${label}: ${topCommands(probe.commands, n, 8)}`),
    ],
    notes: [
      'The per-follow-up figures include fixed costs of the period (BullMQ worker heartbeats, poll ' +
        'ticks with nothing due: about 4 ticks per second), spread over the follow-ups of the run.',
      `redis-server CPU per follow-up, run by run: ours, all roles together ` +
        `${runs(cpuRuns.ours)} µs; baseline, add + process ${runs(cpuRuns.baseline)} µs.`,
    ],
  };
}

/**
 * The runs whose Redis CPU the summary compares, up to `ctx.repeats` pairs of ours with all roles
 * together and the baseline. The CPU figure moves from run to run on a shared machine, the
 * command counts barely.
 */
function pairedRuns(ctx: BenchContext, n: number) {
  const side = (label: string, once: () => Promise<ProbeResult[]>): Side<ProbeResult[]> => ({
    async once(run) {
      const probes = await once();
      ctx.progress('redis-work', `${label} run ${run + 1}: ${num(cpuUs(probes) / n)} µs`);
      return probes;
    },
    figure: (probes) => cpuUs(probes) / n,
  });
  return repeatedPairs(
    ctx.repeats,
    side('ours, all roles together', () => ours(ctx, n, true)),
    side('baseline', () => baseline(ctx, n)),
    ctx.mayRepeat,
  );
}

/** The scenario's run (registered in run.ts). */
export const redisWorkScenario: ScenarioRun = async (ctx, n) => {
  const retained: string[] = [];
  const [enqueue, send, track] = (await ours(ctx, n, false, async (ns) => {
    retained.push(await oursRetained(ctx.admin, ns));
  })) as [ProbeResult, ProbeResult, ProbeResult];
  ctx.progress('redis-work', 'ours, phase by phase: done');
  const paired = await pairedRuns(ctx, n);
  const [together] = paired.ours.typical as [ProbeResult];
  const [bEnqueue, bProcess] = paired.baseline.typical as [ProbeResult, ProbeResult];
  const scripts = {
    ours: await timeScripts(ctx, () => ours(ctx, n, true)),
    // Key sizes do not depend on the command log: the timed run is also the one looked at after.
    base: await timeScripts(ctx, () =>
      baseline(ctx, n, async (ns) => {
        retained.push(await baselineRetained(ctx.admin, ns, n));
      }),
    ),
  };
  ctx.progress('redis-work', 'script times: done');
  const result = report(
    n,
    [
      ['ours: enqueue (sendMany of 100)', enqueue],
      ['ours: send (1 worker)', send],
      ['ours: track to the event (1 poller, runs already over)', track],
      ['ours: all roles together (1 worker + 1 poller, 1 s runs)', together],
      ['baseline: addBulk of 100', bEnqueue],
      ['baseline: process + POST (1 worker)', bProcess],
    ],
    scripts,
    together,
    { ours: paired.ours.values, baseline: paired.baseline.values },
  );
  return { ...result, limitedBy: [...result.limitedBy, retainedLine(retained)] };
};

/** What stays in Redis per follow-up after its event, ours (phase by phase) and the baseline's. */
function retainedLine(lines: readonly string[]): string {
  return (
    `Kept in Redis per follow-up after its event (MEMORY USAGE of each key, the mean of the run's ` +
    `follow-ups): ${lines.join('; ')}. The record stays for DISPATCH_RETENTION (7 days by ` +
    'default), the BullMQ job for 1 hour or the last 10,000, the event until EVENTS_MAXLEN. From ' +
    "MARK_SENT on, the record holds the agent job's last snapshot, JSON longer than Redis's " +
    'default hash-max-listpack-value (64 bytes): at that default Redis keeps the record as a ' +
    'hashtable (its encoding in this run and its size as a listpack are beside its size; ' +
    'docs/operations.md, "What the service costs Redis, and the knobs").'
  );
}
