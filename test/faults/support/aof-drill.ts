import { mkdirSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FollowUpInput } from '../../../src/dispatch/followup.js';
import { createProducer, type Producer } from '../../../src/producer/index.js';
import { keysFor } from '../../../src/redis/keys.js';
import { within } from '../../../src/time/deadline.js';
import type { Simulator } from '../../../src/simulator/index.js';
import type { CliProcess } from '../../support/cli.js';
import { fleetEnv } from '../../support/fleet.js';
import { eventually, useNamespace, type Namespace } from '../../support/namespace.js';
import { startPrivateRedis, type PrivateRedis } from '../../support/redis-server.js';
import { startRoles, terminate, uncleanExits } from '../../support/roles.js';
import { useSimulator } from '../../support/simulator.js';
import { whereIs } from '../../support/where-is.js';
import { startAofProxy, type AofProxy } from './aof-proxy.js';
import { randomMoment } from './drill.js';
import { tally, type Accepted, type Tally } from './ledger.js';
import { openProbe, waitForRole, type Probe } from './quiet.js';
import { DRILL_SETTINGS, DRILL_SIMULATOR, outcomeTypeOf } from './traffic.js';

/**
 * The crash drill of `REDIS_DURABILITY`: a fleet (2 workers, 1 poller, as processes) and a
 * producer work through a proxy against a private Valkey (`appendfsync everysec`). Each crash,
 * under load, SIGKILLs Valkey and cuts its AOF back to what was surely fsynced: with `fsync`, to
 * the size the file had when the last WAITAOF answered; with `none`, to its size 1 s before the
 * kill (what everysec may lose). Valkey restarts on the cut file, the producer retries what it was
 * refused (same key), and the fleet finishes. The books of each crash: accepted follow-ups without
 * an event, prompts sent twice, events per follow-up, order.
 */

/** Sizes of one drill. */
export interface AofDrillOptions {
  readonly mode: 'fsync' | 'none';
  readonly crashes: number;
  /** Follow-ups per `sendMany` batch, and the pause between batches. */
  readonly batch: number;
  readonly batchIntervalMs: number;
  /** How long the load runs before the kill, at random in this range. */
  readonly loadMs: readonly [number, number];
  /** How long each crash waits for its follow-ups to end before the next one. */
  readonly settleMs: number;
  /** Longest wait, after the last crash, for every follow-up to end. */
  readonly finalSettleMs: number;
  /**
   * The share of API requests answered 5xx (default 0): each refused send is re-queued, so the
   * crashes also cut re-queues.
   */
  readonly apiErrorRate?: number;
}

/** What one crash did, and its books. */
export interface Crash {
  readonly accepted: number;
  /** Sends the producer was refused (Valkey went down under them), retried after the restart. */
  readonly refused: number;
  /** Bytes of the AOF cut off. */
  readonly cutBytes: number;
  /** Accepted follow-ups whose record did not survive (only `none` may have any). */
  readonly gone: number;
  readonly books: Tally;
  /** Follow-ups with other than exactly one event. */
  readonly notOneEvent: number;
  /** Every follow-up of the drill ended and the namespace went idle. */
  readonly quiet: boolean;
  /**
   * Where the follow-ups without exactly one event are, counted by `<state>/<job state>`
   * (`gone` when the record is missing): the evidence when the drill fails.
   */
  readonly stranded: Record<string, number>;
}

/** What the whole drill did. */
export interface AofDrillResult {
  readonly crashes: Crash[];
  /** WAITAOF replies seen by the proxy. */
  readonly waitaofReplies: number;
  /** Role processes that did not exit 0 on SIGTERM at the end. */
  readonly unclean: string[];
}

/** What each mode of the drill runs with besides its sizes: `fsync` also under API errors. */
const MODE_RUNS = {
  fsync: { apiErrorRate: 0.25, settleMs: 10_000 },
  none: { settleMs: 5_000 },
} as const;

/** The sizes a file's drills share. */
export type AofDrillSizes = Pick<AofDrillOptions, 'batch' | 'batchIntervalMs' | 'loadMs'>;

/**
 * The setup every durability drill shares (the fault suite's, and its short form in
 * test/redis/crash-drill.redis.test.ts): one simulator with {@link DRILL_SIMULATOR} for the file
 * and a fresh namespace `label` per test. Returns how a test runs one drill of `mode` with
 * `sizes`: `crashes` crashes, then up to `finalSettleMs` for every follow-up to end.
 */
export function useAofDrill(
  label: string,
  sizes: AofDrillSizes,
): (
  mode: AofDrillOptions['mode'],
  crashes: number,
  finalSettleMs: number,
) => Promise<AofDrillResult> {
  const simulator = useSimulator(DRILL_SIMULATOR);
  const ns = useNamespace(label, { simulator });
  return (mode, crashes, finalSettleMs) =>
    runAofDrill(ns(), simulator(), { ...sizes, ...MODE_RUNS[mode], mode, crashes, finalSettleMs });
}

const PROJECTS = 5;
const JOBS = 20;

/**
 * Send attempts in the drill (the producer's, stored on each job, and the roles'). A quarter of
 * sends 5xx, and BullMQ waits `base × 2^(n-1)` before attempt n+1 (base 0.5 to 1 s): with the
 * default 8, one follow-up in 4,096 meets 6 or more refusals in a row and waits 31 to 127 s in
 * all, which can outlast the short drill's final wait (it failed CI so). With 5, a follow-up's
 * waits add up to at most 15 s, and one in 1,024 ends `undeliverable` (`send_failed:server`)
 * instead, which the books check was never delivered.
 */
export const AOF_DRILL_ATTEMPTS = 5;

/** Runs the drill in `ns` (its prefix and stream) against a Valkey of its own. */
export async function runAofDrill(
  ns: Namespace,
  simulator: Simulator,
  o: AofDrillOptions,
): Promise<AofDrillResult> {
  simulator.setFaults({ serverErrorRate: o.apiErrorRate ?? 0 });
  const server = await startPrivateRedis('valkey-server');
  const proxy = await startAofProxy(server.url, server.dir);
  const durability = o.mode === 'fsync' ? 'fsync' : 'none';
  const producer = createProducer({
    redisUrl: proxy.url,
    prefix: ns.prefix,
    sendAttempts: AOF_DRILL_ATTEMPTS,
    durability:
      o.mode === 'fsync' ? { mode: 'fsync', replicas: 0, strict: false } : { mode: 'none' },
  });
  const probe = openProbe(server.url, ns.prefix, ns.eventsStream);
  const env = fleetEnv(ns, simulator, {
    ...DRILL_SETTINGS,
    REDIS_URL: proxy.url,
    REDIS_DURABILITY: durability,
    REPAIR_GRACE: '2s',
    // DURABILITY_DRILL_LOGS keeps the roles' logs: at debug, every step of every follow-up.
    LOG_LEVEL: process.env['DURABILITY_DRILL_LOGS'] ? 'debug' : 'info',
    // Recording a send's answer is retried this long: longer than a restart takes.
    SEND_TIMEOUT: '5s',
    SEND_ATTEMPTS: String(AOF_DRILL_ATTEMPTS),
  });
  const processes: CliProcess[] = [
    ...startRoles('worker', 2, env),
    ...startRoles('poller', 1, env),
  ];
  const crashes: Crash[] = [];
  try {
    await waitForRole(probe, 'dispatch', 2);
    await waitForRole(probe, 'poll', 1);
    const runs: CrashRun[] = [];
    for (let c = 0; c < o.crashes; c++)
      runs.push(await crash(c, { server, proxy, producer, probe, simulator, ns }, o));
    const all = runs.flatMap((r) => r.accepted);
    const gone = runs.reduce((sum, r) => sum + r.gone, 0);
    const quiet = await settled(probe, ns, all, gone, o.finalSettleMs);
    for (const [c, run] of runs.entries())
      crashes.push(await booksOf(c, run, probe, simulator, quiet));
    const exits = await bounded(terminate(processes), 'the roles to stop on SIGTERM');
    keepLogs(processes);
    return {
      crashes,
      waitaofReplies: proxy.waitaofReplies(),
      unclean: uncleanExits(processes, exits),
    };
  } finally {
    simulator.setFaults({ serverErrorRate: 0 });
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await producer.close();
    await probe.close();
    await proxy.close();
    await server.destroy();
  }
}

interface Rig {
  readonly server: PrivateRedis;
  readonly proxy: AofProxy;
  readonly producer: Producer;
  readonly probe: Probe;
  readonly simulator: Simulator;
  readonly ns: Namespace;
}

/** One crash: load, SIGKILL, cut, restart, retry the refused, settle, books. */
/** What one crash left, before the books. */
interface CrashRun {
  readonly accepted: Accepted[];
  readonly refused: number;
  readonly cutBytes: number;
  readonly gone: number;
}

async function crash(n: number, rig: Rig, o: AofDrillOptions): Promise<CrashRun> {
  const { server, proxy, producer, probe, simulator, ns } = rig;
  const accepted: Accepted[] = [];
  const refused: FollowUpInput[] = [];
  let stopped = false;
  let i = 0;
  // Agent jobs of this crash only: a lane another crash left waiting does not hold this one up.
  for (let p = 0; p < PROJECTS; p++)
    for (let j = 0; j < JOBS; j++) simulator.seedJob(`d${p}`, `c${n}j${j}`);
  const load = (async () => {
    while (!stopped) {
      const batch = Array.from({ length: o.batch }, (): FollowUpInput => {
        i++;
        return {
          projectId: `d${i % PROJECTS}`,
          jobId: `c${n}j${Math.floor(i / PROJECTS) % JOBS}`,
          prompt: `crash ${n} #${i}`,
          key: `c${n}-${i}`,
        };
      });
      try {
        const results = await bounded(producer.sendMany(batch), 'a send under load');
        accepted.push(...results.map((r, k) => ({ dispatchId: r.dispatchId, input: batch[k]! })));
      } catch {
        refused.push(...batch);
      }
      await new Promise((r) => setTimeout(r, o.batchIntervalMs));
    }
  })();
  await randomMoment(o.loadMs[0], o.loadMs[1]);
  await server.stop('SIGKILL');
  // What survives the crash: with fsync, what the last WAITAOF vouched for (read after the kill:
  // no reply can pass after it); with none, what everysec may have fsynced (the file 1 s before).
  const keep = o.mode === 'fsync' ? proxy.lastWaitaofSize() : proxy.sizeAgo(1_000);
  stopped = true;
  const file = proxy.incrFile();
  const { size } = statSync(file);
  truncateSync(file, Math.min(keep, size));
  await server.restart();
  proxy.reset();
  // A send in flight at the kill ends now: accepted (its write made durable after the restart,
  // or kept) or refused.
  await load;
  // Refused sends may have been stored before the kill: the same key enqueues them at most once.
  for (let k = 0; k < refused.length; k += o.batch) {
    const batch = refused.slice(k, k + o.batch);
    const results = await eventually(
      () => bounded(producer.sendMany(batch), 'a send').catch(() => undefined),
      {
        timeoutMs: 30_000,
        what: 'the producer after the restart',
      },
    );
    accepted.push(...results.map((r, j) => ({ dispatchId: r.dispatchId, input: batch[j]! })));
  }
  const keys = keysFor(ns.prefix);
  const exists = await Promise.all(
    accepted.map((a) => probe.redis.exists(keys.dispatch(a.dispatchId))),
  );
  const gone = exists.filter((e) => e === 0).length;
  // Most of it ends within seconds; what a cut left waiting (a lost wake-up, a send whose answer
  // was not recorded) ends by itself later, and the drill's final settling waits for it.
  await settled(probe, ns, accepted, gone, o.settleMs);
  return {
    accepted,
    refused: refused.length,
    cutBytes: size - Math.min(keep, size),
    gone,
  };
}

/**
 * The longest a drill waits for one producer call or for its roles to stop: a call in flight at
 * the kill waits for the restart (ioredis re-sends it), a role stops within SHUTDOWN_TIMEOUT. A
 * step that outlasts it fails the drill naming the step, not the test's whole timeout.
 */
const STEP_TIMEOUT_MS = 20_000;

function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  return within(promise, STEP_TIMEOUT_MS, () => {
    throw new Error(`the drill waited ${STEP_TIMEOUT_MS} ms for ${what}`);
  });
}

/** Waits at most `timeoutMs` until every surviving follow-up of `accepted` has an event. */
async function settled(
  probe: Probe,
  ns: Namespace,
  accepted: readonly Accepted[],
  gone: number,
  timeoutMs: number,
): Promise<boolean> {
  const keys = keysFor(ns.prefix);
  const ids = new Set(accepted.map((a) => a.dispatchId));
  return eventually(
    async () => {
      const events = (await probe.events()).filter((e) => ids.has(e.dispatchId));
      const [tracked, pending] = await Promise.all([
        probe.redis.zcard(keys.tracked),
        probe.pendingJobs(),
      ]);
      return new Set(events.map((e) => e.dispatchId)).size >= ids.size - gone &&
        tracked === 0 &&
        pending === 0
        ? true
        : undefined;
    },
    { timeoutMs, intervalMs: 250, what: 'the drill to settle' },
  ).catch(() => false);
}

/** The books of one crash, read once the whole drill settled. */
async function booksOf(
  n: number,
  c: CrashRun,
  probe: Probe,
  simulator: Simulator,
  quiet: boolean,
): Promise<Crash> {
  const ids = new Set(c.accepted.map((a) => a.dispatchId));
  const events = (await probe.events()).filter((e) => ids.has(e.dispatchId));
  const prefix = `crash ${n} #`;
  const deliveries = simulator.deliveries.filter((d) => d.prompt.startsWith(prefix));
  const books = tally(c.accepted, events, deliveries, outcomeTypeOf);
  const perId = new Map<string, number>();
  for (const e of events) perId.set(e.dispatchId, (perId.get(e.dispatchId) ?? 0) + 1);
  const odd = [...ids].filter((id) => perId.get(id) !== 1);
  const stranded: Record<string, number> = {};
  for (const id of odd) {
    const where = `${perId.get(id) ?? 0} events, ${await whereIs(probe.redis, probe.prefix, id, (job) => probe.jobState(job))}`;
    stranded[where] = (stranded[where] ?? 0) + 1;
    if (process.env['DURABILITY_DRILL_LOGS']) console.log(`stranded ${id}: ${where}`);
  }
  return {
    accepted: c.accepted.length,
    refused: c.refused,
    cutBytes: c.cutBytes,
    gone: c.gone,
    books,
    notOneEvent: odd.length,
    quiet,
    stranded,
  };
}

/**
 * With `DURABILITY_DRILL_LOGS=<folder>`, writes each role process's output there (`worker-1.log`,
 * ...), to read what the fleet did after the drill.
 */
function keepLogs(processes: readonly CliProcess[]): void {
  const folder = process.env['DURABILITY_DRILL_LOGS'];
  if (!folder) return;
  mkdirSync(folder, { recursive: true });
  for (const [i, p] of processes.entries())
    writeFileSync(join(folder, `role-${i + 1}.log`), p.output.stdout + p.output.stderr);
}

/** One line of figures for a crash. */
export function describeCrash(c: Crash, n: number): string {
  const b = c.books;
  const stranded = Object.entries(c.stranded).map(([where, count]) => `${count} × ${where}`);
  return `crash ${n + 1}: accepted ${c.accepted} (${c.refused} refused under the kill, retried), AOF cut by ${c.cutBytes} bytes; lost ${b.lost.length} (records gone ${c.gone}), sent twice ${b.duplicateDeliveries.length}, send failures of delivered prompts ${b.failedButDelivered.length}, not exactly one event ${c.notOneEvent}${stranded.length ? ` (${stranded.join('; ')})` : ''}, order violations ${b.orderViolations.length}, settled ${c.quiet}; endings ${JSON.stringify(b.endings)}`;
}
