import { connectionOf, NotDurableError, waitForDisk } from '../redis/durability.js';
import type { StoreState } from './store-state.js';

/**
 * The store's wait for the disk (`REDIS_DURABILITY`), used after ACQUIRE's `go` and after a
 * FINISH that hands the lane on. Take {@link wroteOn} before the write, {@link onDisk} after it.
 */

/** The store connection's current connection number (see `connectionOf`). */
export function wroteOn(state: StoreState): number {
  return connectionOf(state.redis);
}

/**
 * Waits until every earlier write of the store's connection is on disk, as `durability` asks,
 * if the connection is still the one `connection` (see `connectionOf`). Resolves to `undefined`
 * when it is (or nothing is asked), else to why not.
 */
export async function onDisk(state: StoreState, connection: number): Promise<string | undefined> {
  const durability = state.options.durability;
  if (!durability) return undefined;
  try {
    const assessment = await durability.assessment();
    await waitForDisk(state.redis, assessment, durability.timeoutMs, connection);
    return undefined;
  } catch (err) {
    if (err instanceof NotDurableError) return err.message;
    throw err;
  }
}
