import { itemAnswer, type ItemFailure } from './call-batch.js';
import type { StoreState } from './store-state.js';

/** Most reschedules in one call of reschedule-n.lua: its arguments stay a few thousand. */
export const MAX_RESCHEDULES = 200;

/** One reschedule: the next read of `dispatchId` `delayMs` ahead, `fields` stored on its record. */
export interface Reschedule {
  readonly dispatchId: string;
  readonly delayMs: number;
  readonly fields: Record<string, string | number>;
}

/**
 * Runs `items` in one call of reschedule-n.lua (see `Tracking.reschedule`, which batches them):
 * for each, whether it was still tracked, or its failure (a record that is not a hash: it wrote
 * nothing).
 */
export async function rescheduleMany(
  state: StoreState,
  items: readonly Reschedule[],
): Promise<(boolean | ItemFailure)[]> {
  const { keys, scripts, clock } = state;
  const args: (string | number)[] = [items.length];
  for (const { dispatchId, delayMs, fields } of items) {
    const pairs = Object.entries(fields).flat();
    // When the read falls due by Redis's clock; 0: the script counts `delayMs` from TIME.
    const at = clock.inMs(delayMs) ?? 0;
    args.push(dispatchId, Math.max(1, Math.round(delayMs)), at, pairs.length, ...pairs);
  }
  const recordKeys = items.map((item) => keys.dispatch(item.dispatchId));
  const reply = await scripts.run('reschedule', [keys.tracked, ...recordKeys], args);
  return (Array.isArray(reply) ? (reply as (number | Error)[]) : []).map((moved) => {
    const answer = itemAnswer('reschedule', moved);
    return typeof answer === 'number' ? answer === 1 : answer;
  });
}
