import type { Redis } from 'ioredis';
import { keysFor } from '../../../src/redis/keys.js';
import type { Delivery, Simulator } from '../../../src/simulator/index.js';
import { logLines } from '../../support/cli.js';
import type { StreamEvent } from '../../support/events.js';
import type { Accepted } from './ledger.js';

/** Event types that report the run's outcome (the send was settled as delivered). */
const OUTCOMES = new Set(['followup.completed', 'followup.failed', 'followup.archived']);

/**
 * Promise 3, for prompts the API did receive: each must end as its run's outcome, or, when the
 * send could not be settled, as `undeliverable` with reason `ambiguous` (never as a send failure,
 * which would claim it was not delivered). Returns the dispatch ids that ended otherwise.
 */
export function misSettled(
  accepted: readonly Accepted[],
  events: readonly StreamEvent[],
  deliveries: readonly Delivery[],
): string[] {
  const delivered = new Set(deliveries.map((d) => d.prompt));
  const promptOf = new Map(accepted.map((a) => [a.dispatchId, a.input.prompt]));
  return events
    .filter((e) => delivered.has(promptOf.get(e.dispatchId) ?? ''))
    .filter((e) => !OUTCOMES.has(e.type))
    .filter((e) => !(e.type === 'followup.undeliverable' && e.event['reason'] === 'ambiguous'))
    .map((e) => e.dispatchId);
}

/**
 * Prompts the simulator accepted more than once, and of those, the permitted ones: a worker logged
 * the dispatch's send as left in doubt (`followup:ambiguous`: its timeout fired or the connection
 * reset after the request was written, or a rerun found the send of a killed worker unfinished),
 * and a poller then resent it (`followup:retry`, only with `AMBIGUOUS_RESEND=true`). What the
 * service saw is the judge, not which fault the simulator injected: under load an answer can be
 * written by the simulator and still arrive after the client gave up, and a SIGKILL injects no
 * fault at all. A malformed 200 is not a doubt (it was delivered) and logs `followup:sent`.
 */
export function deliveredTwiceAfterDoubt(
  simulator: Simulator,
  accepted: readonly Accepted[],
  processes: readonly { output: { stdout: string } }[],
): { all: string[]; afterDoubt: string[] } {
  const doubted = new Set<unknown>();
  const resent = new Set<unknown>();
  for (const p of processes)
    for (const line of logLines(p.output.stdout)) {
      if (line['role'] === 'worker' && line['msg'] === 'followup:ambiguous')
        doubted.add(line['dispatchId']);
      if (line['role'] === 'poller' && line['msg'] === 'followup:retry')
        resent.add(line['dispatchId']);
    }
  const promptOf = new Map(accepted.map((a) => [a.input.prompt, a.dispatchId]));
  const counts = new Map<string, number>();
  for (const d of simulator.deliveries) counts.set(d.prompt, (counts.get(d.prompt) ?? 0) + 1);
  const all = [...counts]
    .filter(([, n]) => n > 1)
    .map(([prompt]) => prompt)
    .sort();
  const permitted = (id: unknown) => doubted.has(id) && resent.has(id);
  return { all, afterDoubt: all.filter((prompt) => permitted(promptOf.get(prompt))) };
}

/**
 * How the sends left in doubt ended: prompts whose request was processed but got no answer
 * (timeout or reset), counted by the ending of their dispatch.
 */
export function doubtEndings(
  simulator: Simulator,
  accepted: readonly Accepted[],
  events: readonly StreamEvent[],
): Record<string, number> {
  const inDoubt = new Set(
    simulator.requests
      .filter((r) => r.kind === 'send' && (r.fault === 'timeout' || r.fault === 'reset'))
      .map((r) => r.prompt),
  );
  const promptOf = new Map(accepted.map((a) => [a.dispatchId, a.input.prompt]));
  const endings: Record<string, number> = {};
  for (const e of events) {
    if (!inDoubt.has(promptOf.get(e.dispatchId))) continue;
    const reason = typeof e.event['reason'] === 'string' ? `:${e.event['reason']}` : '';
    const ending = OUTCOMES.has(e.type)
      ? 'settled as delivered (its outcome)'
      : `${e.type}${reason}`;
    endings[ending] = (endings[ending] ?? 0) + 1;
  }
  return endings;
}

/**
 * Dispatches that ended `undeliverable: ambiguous` although their record says a status read saw
 * the run `active` after the send (`seenActive`): the send was settled as delivered, and the
 * ending contradicts it. (The record outlives its event for `DISPATCH_RETENTION`.)
 */
export async function ambiguousDespiteSeenActive(
  redis: Redis,
  prefix: string,
  events: readonly StreamEvent[],
): Promise<string[]> {
  const ambiguous = events
    .filter((e) => e.type === 'followup.undeliverable' && e.event['reason'] === 'ambiguous')
    .map((e) => e.dispatchId);
  const keys = keysFor(prefix);
  const seen = await Promise.all(
    ambiguous.map((id) => redis.hget(keys.dispatch(id), 'seenActive')),
  );
  return ambiguous.filter((_, i) => seen[i] === '1');
}
