import { describe, expect, it, type TestContext } from 'vitest';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { fleetEnv, grid } from '../support/fleet.js';
import { startRoles, terminate, uncleanExits } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';
import { faultCounts, startChaos } from './support/chaos.js';
import { expectCleanBooks } from './support/crash-case.js';
import { describeCounts, recordFigures, stopwatch } from './support/figures.js';
import { useDrill } from './support/fixture.js';
import { tally, tallyNotes } from './support/ledger.js';
import { waitForRole } from './support/quiet.js';
import { SCALE } from './support/scale.js';
import {
  countLogLines,
  DRILL_SETTINGS,
  DRILL_SIMULATOR,
  isAlive,
  outcomeTypeOf,
} from './support/traffic.js';
import {
  ambiguousDespiteSeenActive,
  deliveredTwiceAfterDoubt,
  doubtEndings,
  misSettled,
} from './support/settling.js';

describe('4. agent-API faults', () => {
  const simulator = useSimulator({
    ...DRILL_SIMULATOR,
    // Runs of 1 to 2 s: the poller, whose reads fail too, still gets to see most of them active.
    workTimeMs: () => 1_000 + Math.floor(Math.random() * 1_000),
  });
  const fixture = useDrill('f-api', simulator);

  async function drill(ctx: Pick<TestContext, 'task'>, resend: boolean): Promise<void> {
    const watch = stopwatch();
    const { ns, producer, probe } = fixture();
    const { followUps, projects, rounds } = SCALE.api;
    const env = fleetEnv(ns, simulator(), {
      ...DRILL_SETTINGS,
      SEND_TIMEOUT: '1s',
      SEND_ATTEMPTS: '6',
      AMBIGUOUS_RESEND: String(resend),
    });
    const processes = [...startRoles('worker', 2, env), ...startRoles('poller', 1, env)];
    fixture().processes = processes;
    await waitForRole(probe, 'dispatch', 2);
    const jobs = Math.max(1, Math.round(followUps / projects / rounds));
    const inputs = grid(simulator(), projects, jobs, rounds, 'a');
    const chaos = startChaos(
      simulator(),
      Array.from({ length: projects }, (_, p) => `a${p}`),
    );
    const results = await producer.sendMany(inputs);
    const accepted = results.map((r, i) => ({
      dispatchId: r.dispatchId,
      input: inputs[i] as FollowUpInput,
    }));
    const { events, quiet } = await probe.settle(accepted.length, 300_000);
    chaos.stop();
    const books = tally(accepted, events, simulator().deliveries, outcomeTypeOf);
    const wrongSettling = misSettled(accepted, events, simulator().deliveries);
    const seenButAmbiguous = await ambiguousDespiteSeenActive(probe.redis, ns.prefix, events);
    const alive = processes.filter((p) => isAlive(p.child)).length;
    const exits = await terminate(processes);
    // After the stop: every log line is complete.
    const twice = deliveredTwiceAfterDoubt(simulator(), accepted, processes);
    const duplicatesAllowed = resend ? twice.afterDoubt.length : 0;
    recordFigures(ctx, {
      category: 4,
      scenario: `AMBIGUOUS_RESEND=${resend}: ${accepted.length} follow-ups to ${projects * jobs} agent jobs in ${projects} projects; 2 workers, 1 poller; SEND_TIMEOUT 1s, SEND_ATTEMPTS 6`,
      tried: accepted.length,
      faults: `AMBIGUOUS_RESEND=${resend}; 30 % 5xx, 10 % timeouts and 5 % resets after processing, 5 % HTML 502, 5 % malformed JSON, 10 % unknown status; ${chaos.log.bursts} 429 bursts; slow answers and slow bodies`,
      lost: books.lost.length,
      duplicated: books.duplicateEvents.length + books.duplicateDeliveries.length,
      leaked: 0,
      notes: [
        ...tallyNotes(books, describeCounts),
        `requests: ${describeCounts(faultCounts(simulator()))}`,
        `429 bursts ${chaos.log.bursts} (${chaos.log.burstsWithRetryAfter} with Retry-After, ${chaos.log.burstsPlainText} plain text); of ${chaos.log.ticks} chaos ticks ${chaos.log.slowTicks} answered slower than SEND_TIMEOUT, ${chaos.log.slowBodyTicks} had slow bodies`,
        `sends in doubt (processed, then a timeout or reset): ${describeCounts(doubtEndings(simulator(), accepted, events))}`,
        `settling: delivered prompts reported as anything but their run's outcome or undeliverable:ambiguous ${wrongSettling.length}; resends by the poller ${countLogLines(processes, 'followup:retry')}; unknown statuses logged ${countLogLines(processes, 'followup:unknown-status')}`,
        `ended ambiguous although the record says a read saw the run active: ${seenButAmbiguous.length}`,
        `prompts delivered twice ${twice.all.length}: ${twice.afterDoubt.length} resent by the poller after a send a worker logged as in doubt (${resend ? 'the risk AMBIGUOUS_RESEND=true accepts' : 'must be 0 without AMBIGUOUS_RESEND'}), ${twice.all.length - twice.afterDoubt.length} otherwise`,
        `settled to an idle namespace: ${quiet}; processes alive at the end ${alive}/${exits.length}, exit codes on SIGTERM: ${[...new Set(exits)].join(', ')}`,
      ],
      durationMs: watch(),
    });

    expectCleanBooks(books, duplicatesAllowed);
    expect(twice.all).toEqual(twice.afterDoubt);
    if (!resend) expect(wrongSettling).toEqual([]);
    expect(seenButAmbiguous).toEqual([]);
    expect(quiet).toBe(true);
    expect(alive).toBe(exits.length);
    expect(uncleanExits(processes, exits)).toEqual([]);
  }

  it('ends every follow-up once and settles each ambiguous send (AMBIGUOUS_RESEND=false)', (ctx) =>
    drill(ctx, false));

  it('ends every follow-up once and resends only what it could not settle (AMBIGUOUS_RESEND=true)', (ctx) =>
    drill(ctx, true));
});
