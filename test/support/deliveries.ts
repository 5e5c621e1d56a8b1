import type { Delivery } from '../../src/simulator/index.js';

/**
 * Readings of the simulator's record of what it accepted, shared by the tests and the bench (no
 * Vitest import here): the budget is judged by these arrival times, never by the service's counters.
 */

/** When each of one project's deliveries arrived at the simulator (epoch ms), ascending. */
export function arrivalTimes(deliveries: readonly Delivery[], projectId: string): number[] {
  return deliveries
    .filter((d) => d.projectId === projectId)
    .map((d) => d.at)
    .sort((a, b) => a - b);
}

/**
 * The most deliveries within any window of `windowMs` (a window holds times less than `windowMs`
 * apart); `times` ascending, as {@link arrivalTimes} returns them.
 */
export function busiestWindow(times: readonly number[], windowMs: number): number {
  let most = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while ((times[end] as number) - (times[start] as number) >= windowMs) start++;
    most = Math.max(most, end - start + 1);
  }
  return most;
}
