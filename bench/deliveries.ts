import type { Redis } from 'ioredis';
import type { DispatchInput } from '../src/dispatch/creation.js';
import { keysFor } from '../src/redis/keys.js';
import type { Delivery, Simulator } from '../src/simulator/index.js';

/**
 * Readings of the simulator's ground truth: when each prompt was accepted, per project. Every
 * rate figure in the report comes from these times, never from the service's own counters.
 */

/** Delivery times per project, ascending. */
export function timesByProject(deliveries: readonly Delivery[]): Map<string, number[]> {
  const times = new Map<string, number[]>();
  for (const d of deliveries) {
    let list = times.get(d.projectId);
    if (!list) {
      list = [];
      times.set(d.projectId, list);
    }
    list.push(d.at);
  }
  for (const list of times.values()) list.sort((a, b) => a - b);
  return times;
}

/**
 * The share of a `max` per `windowMs` budget that `times` used over a period of `periodMs` (every
 * time lies within it): sends / (max × period / window). A limiter that keeps a backlogged project
 * at its budget scores about 1, whether it sends in bursts or evenly.
 */
export function budgetShare(
  times: readonly number[],
  max: number,
  windowMs: number,
  periodMs: number,
): number {
  return times.length / ((max * periodMs) / windowMs);
}

/**
 * How much later than the window allows each send came: the time from send k to send k + max,
 * minus `windowMs`. Zero means no slot was wasted; the budget margin and late wake-ups show here.
 */
export function slotSlackMs(times: readonly number[], max: number, windowMs: number): number[] {
  const slack: number[] = [];
  for (let k = 0; k + max < times.length; k++) {
    slack.push((times[k + max] as number) - (times[k] as number) - windowMs);
  }
  return slack;
}

/** Per send: simulator arrival minus the record's sentAt (ACQUIRE's clock reading). */
export async function intentToArrivalMs(
  admin: Redis,
  prefix: string,
  ids: readonly string[],
  inputs: readonly DispatchInput[],
  simulator: Simulator,
): Promise<number[]> {
  const keys = keysFor(prefix);
  const pipeline = admin.pipeline();
  for (const id of ids) pipeline.hget(keys.dispatch(id), 'sentAt');
  const replies = (await pipeline.exec()) ?? [];
  // By prompt: a creation's job id is the simulator's, and every bench prompt is unique.
  const arrival = new Map(simulator.deliveries.map((d) => [d.prompt, d.at]));
  return ids.flatMap((_, i) => {
    const at = arrival.get(inputs[i]?.prompt ?? '');
    const sentAt = Number(replies[i]?.[1] ?? 0);
    return at === undefined || !(sentAt > 0) ? [] : [at - sentAt];
  });
}
