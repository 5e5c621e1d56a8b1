import { NotDurableError, waitForDisk } from '../redis/durability.js';
import { markWrite, type WriteMark } from '../redis/write-mark.js';
import type { StoreState } from './store-state.js';

/**
 * The store's wait for the disk (`REDIS_DURABILITY`), used after ACQUIRE's `go`, after MARK_SENT,
 * after REQUEUE and after a FINISH that hands the lane on. Take {@link wroteOn} before the write,
 * {@link onDisk} after it.
 */

/**
 * Marks a write of the store's shard about to go: the connection that takes it (on a cluster, the
 * shard's master's) and its connection number (see `markWrite`). Nothing to mark (`undefined`)
 * when the store waits for nothing: then the write costs no lookup, and no wait for a node's
 * connection.
 */
export async function wroteOn(state: StoreState): Promise<WriteMark | undefined> {
  const durability = state.options.durability;
  if (!durability) return undefined;
  const mode = await durability.assessment().then(
    (a) => a.mode,
    () => 'unknown',
  );
  if (mode !== 'waitaof' && mode !== 'unknown') return undefined;
  return markWrite(state.redis, state.keys.tracked);
}

/**
 * Waits until the write marked `mark` is on disk, as `durability` asks, on the connection that
 * took it. Resolves to `undefined` when it is (or nothing is asked), else to why not.
 */
export async function onDisk(
  state: StoreState,
  mark: WriteMark | undefined,
): Promise<string | undefined> {
  const durability = state.options.durability;
  if (!durability) return undefined;
  try {
    const assessment = await durability.assessment();
    if (assessment.mode !== 'waitaof') return undefined;
    if (!mark)
      return 'Redis did not confirm the write on disk: it was not marked before it was sent';
    await waitForDisk(mark, assessment, durability.timeoutMs);
    return undefined;
  } catch (err) {
    if (err instanceof NotDurableError) return err.message;
    throw err;
  }
}
