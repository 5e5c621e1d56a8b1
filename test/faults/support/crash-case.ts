import { expect, type TestContext } from 'vitest';
import type { Producer } from '../../../src/producer/index.js';
import type { Simulator } from '../../../src/simulator/index.js';
import type { CliProcess } from '../../support/cli.js';
import { fleetEnv, grid } from '../../support/fleet.js';
import type { Namespace } from '../../support/namespace.js';
import { startRoles, terminate, uncleanExits } from '../../support/roles.js';
import { describeCrash, type AofDrillResult } from './aof-drill.js';
import { crashDrill } from './drill.js';
import { describeCounts, recordFigures, stopwatch } from './figures.js';
import { headline, tally, tallyNotes, type Tally } from './ledger.js';
import type { Probe } from './quiet.js';
import { SCALE } from './scale.js';
import { countLogLines, DRILL_SETTINGS, isAlive, outcomeTypeOf } from './traffic.js';

/** What a crash case needs from its test file. */
export interface CrashCase {
  readonly role: 'worker' | 'poller';
  readonly simulator: Simulator;
  readonly ns: Namespace;
  readonly producer: Producer;
  readonly probe: Probe;
  /** Receives every process started, so the file's `afterEach` can kill what is left. */
  readonly track: (processes: CliProcess[]) => void;
}

/**
 * Categories 1 and 2: two processes of `role` (the other role runs undisturbed: 1 poller for the
 * worker drill, 2 workers for the poller drill), one of them SIGKILLed at a random moment after
 * each wave of follow-ups and restarted at once. Records the figures and asserts on them.
 */
export async function runCrashCase(ctx: Pick<TestContext, 'task'>, c: CrashCase): Promise<void> {
  const { followUps, projects, jobsPerProject, kills } = SCALE.crash;
  const watch = stopwatch();
  const env = fleetEnv(c.ns, c.simulator, DRILL_SETTINGS);
  const other = c.role === 'worker' ? startRoles('poller', 1, env) : startRoles('worker', 2, env);
  c.track(other);
  const perJob = Math.ceil(followUps / (projects * jobsPerProject));
  const inputs = grid(c.simulator, projects, jobsPerProject, perJob, c.role[0]);
  const drill = await crashDrill({ ...c, count: 2, kills, env, inputs });
  const processes = [...other, ...drill.running];
  c.track(processes);

  const { events, quiet } = await c.probe.settle(drill.accepted.length, 120_000);
  const books = tally(drill.accepted, events, c.simulator.deliveries, outcomeTypeOf);
  const recovered = await c.probe.recoveredJobs();
  const orphanedTicks = await c.probe.orphanedTicks();
  const everyone = [...processes, ...drill.killed];
  const alive = processes.filter((p) => isAlive(p.child)).length;
  const exits = await terminate(processes);
  recordFigures(ctx, {
    category: c.role === 'worker' ? 1 : 2,
    scenario: `${books.accepted} follow-ups to ${projects * jobsPerProject} agent jobs in ${projects} projects, enqueued in ${kills} waves; 2 ${c.role} processes, each kill hits one of them at random; ${other.length} ${c.role === 'worker' ? 'poller' : 'workers'} undisturbed`,
    tried: books.accepted,
    faults: `${drill.killed.length} SIGKILLs of a ${c.role}, each restarted`,
    ...headline(books),
    leaked: 0,
    notes: [
      ...tallyNotes(books, describeCounts),
      `kills ${Math.min(...drill.killDelaysMs)}–${Math.max(...drill.killDelaysMs)} ms after a wave was enqueued; STALLED_TIMEOUT 2s, ACTIVE_GRACE 1s`,
      `dispatch jobs taken over from a killed worker ${recovered}; sends left in doubt by a kill and settled from the job's status ${countLogLines(everyone, 'followup:ambiguous')}; poll ticks cut short by a kill ${orphanedTicks}`,
      `settled to an idle namespace: ${quiet}; processes alive at the end ${alive}/${exits.length}, exit codes on SIGTERM: ${[...new Set(exits)].join(', ')}`,
    ],
    durationMs: watch(),
  });
  expect(drill.killed).toHaveLength(kills);
  expectCleanBooks(books);
  expect(quiet).toBe(true);
  expect(alive).toBe(exits.length);
  expect(uncleanExits(processes, exits)).toEqual([]);
}

/**
 * Nothing lost, nothing twice, nothing out of order, every outcome true to the simulator; prompts
 * delivered twice exactly `duplicateDeliveries` (a drill that accepts resends says how many).
 */
export function expectCleanBooks(books: Tally, duplicateDeliveries = 0): void {
  expect(books.lost).toEqual([]);
  expect(books.duplicateEvents).toEqual([]);
  expect(books.phantomEvents).toEqual([]);
  expect(books.duplicateDeliveries).toHaveLength(duplicateDeliveries);
  expect(books.outcomesWithoutDelivery).toEqual([]);
  expect(books.wrongOutcomes).toEqual([]);
  expect(books.orderViolations).toEqual([]);
}

/**
 * What `REDIS_DURABILITY=fsync` promises through Redis crashes that lose what was not on disk:
 * nothing accepted lost, no prompt sent twice, exactly one event per follow-up, all settled, and
 * none left in doubt: only Redis crashes, no worker dies mid-send, so no follow-up may end
 * `undeliverable: ambiguous` (a re-queue after a refused send that the crash took back would).
 * A follow-up whose every attempt was refused ends `undeliverable: send_failed`, and only if the
 * API never received its prompt.
 */
export function expectDurableDrill(result: AofDrillResult): void {
  expect(result.waitaofReplies).toBeGreaterThan(0);
  for (const [n, c] of result.crashes.entries()) {
    const what = describeCrash(c, n);
    expect(c.gone, what).toBe(0);
    expect(c.notOneEvent, what).toBe(0);
    expectCleanBooks(c.books);
    expect(c.books.endings['followup.undeliverable:ambiguous'] ?? 0, what).toBe(0);
    expect(c.books.failedButDelivered, what).toEqual([]);
    expect(c.quiet, what).toBe(true);
  }
  expect(result.unclean).toEqual([]);
}
