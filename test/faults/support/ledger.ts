import type { FollowUpInput } from '../../../src/dispatch/followup.js';
import type { Delivery } from '../../../src/simulator/index.js';
import type { StreamEvent } from '../../support/events.js';

/** A follow-up that `send` accepted, with what was sent. */
export interface Accepted {
  readonly dispatchId: string;
  readonly input: FollowUpInput;
  /** When `send` answered (epoch ms), where the drill needs it. */
  readonly at?: number;
}

/** The books of a drill: what was accepted against what came out. Lists hold offending ids. */
export interface Tally {
  readonly accepted: number;
  readonly events: number;
  readonly deliveries: number;
  /** Accepted, but no terminal event. */
  readonly lost: readonly string[];
  /** More than one event for one dispatch. */
  readonly duplicateEvents: readonly string[];
  /** Events for dispatches nobody accepted. */
  readonly phantomEvents: readonly string[];
  /** Prompts the API received more than once. */
  readonly duplicateDeliveries: readonly string[];
  /** Events that report a run's outcome for a prompt the API never received. */
  readonly outcomesWithoutDelivery: readonly string[];
  /** Events whose type is not the outcome the simulator gave the prompt. */
  readonly wrongOutcomes: readonly string[];
  /**
   * `undeliverable` events with a `send_failed` reason (every attempt answered 5xx or never
   * written: none processed) for a prompt the API did receive.
   */
  readonly failedButDelivered: readonly string[];
  /** Deliveries to one agent job out of enqueue order. */
  readonly orderViolations: readonly string[];
  /** Events by `type` (and `reason` when set). */
  readonly endings: Readonly<Record<string, number>>;
}

const OUTCOME_TYPES = new Set(['followup.completed', 'followup.failed', 'followup.archived']);

/**
 * Balances the books. `outcomeTypeOf` gives the event type the simulator's outcome for a prompt
 * implies; omit it when outcomes are not fixed by the prompt.
 */
export function tally(
  accepted: readonly Accepted[],
  events: readonly StreamEvent[],
  deliveries: readonly Delivery[],
  outcomeTypeOf?: (prompt: string) => string,
): Tally {
  const byId = new Map(accepted.map((a) => [a.dispatchId, a]));
  const eventsById = countBy(events.map((e) => e.dispatchId));
  const deliveredCount = countBy(deliveries.map((d) => d.prompt));
  const endings: Record<string, number> = {};
  const outcomesWithoutDelivery: string[] = [];
  const wrongOutcomes: string[] = [];
  const failedButDelivered: string[] = [];
  for (const e of events) {
    const reason = typeof e.event['reason'] === 'string' ? `:${e.event['reason']}` : '';
    endings[`${e.type}${reason}`] = (endings[`${e.type}${reason}`] ?? 0) + 1;
    const prompt = byId.get(e.dispatchId)?.input.prompt;
    if (prompt === undefined) continue;
    if (e.type === 'followup.undeliverable' && reason.startsWith(':send_failed')) {
      if (deliveredCount.has(prompt)) failedButDelivered.push(e.dispatchId);
      continue;
    }
    if (!OUTCOME_TYPES.has(e.type)) continue;
    if (!deliveredCount.has(prompt)) outcomesWithoutDelivery.push(e.dispatchId);
    else if (outcomeTypeOf && outcomeTypeOf(prompt) !== e.type) wrongOutcomes.push(e.dispatchId);
  }
  return {
    accepted: byId.size,
    events: events.length,
    deliveries: deliveries.length,
    lost: [...byId.keys()].filter((id) => !eventsById.has(id)),
    duplicateEvents: [...eventsById].filter(([, n]) => n > 1).map(([id]) => id),
    phantomEvents: [...eventsById.keys()].filter((id) => !byId.has(id)),
    duplicateDeliveries: [...deliveredCount].filter(([, n]) => n > 1).map(([p]) => p),
    outcomesWithoutDelivery,
    wrongOutcomes,
    failedButDelivered,
    orderViolations: orderViolations(accepted, deliveries),
    endings,
  };
}

/** Prompts delivered before an earlier-enqueued prompt of the same agent job. */
function orderViolations(accepted: readonly Accepted[], deliveries: readonly Delivery[]): string[] {
  const position = new Map<string, number>();
  const perLane = new Map<string, number>();
  for (const { input } of accepted) {
    const lane = `${input.projectId}\n${input.jobId}`;
    const n = perLane.get(lane) ?? 0;
    perLane.set(lane, n + 1);
    position.set(input.prompt, n);
  }
  const last = new Map<string, number>();
  const violations: string[] = [];
  for (const d of deliveries) {
    const lane = `${d.projectId}\n${d.jobId}`;
    const at = position.get(d.prompt);
    if (at === undefined) continue;
    if (at < (last.get(lane) ?? -1)) violations.push(d.prompt);
    last.set(lane, Math.max(at, last.get(lane) ?? -1));
  }
  return violations;
}

function countBy(values: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return counts;
}

/** The tally's headline figures: `lost` and `duplicated` for the report. */
export function headline(t: Tally): { lost: number; duplicated: number } {
  return {
    lost: t.lost.length,
    duplicated: t.duplicateEvents.length + t.duplicateDeliveries.length,
  };
}

/** The tally's other figures, as report notes. */
export function tallyNotes(t: Tally, describe: (c: Record<string, number>) => string): string[] {
  return [
    `accepted ${t.accepted}, events ${t.events}, deliveries ${t.deliveries}`,
    `events: ${describe(t.endings)}`,
    `phantom events ${t.phantomEvents.length}, outcomes reported without delivery ${t.outcomesWithoutDelivery.length}, wrong outcomes ${t.wrongOutcomes.length}, send failures of delivered prompts ${t.failedButDelivered.length}, order violations ${t.orderViolations.length}`,
  ];
}
