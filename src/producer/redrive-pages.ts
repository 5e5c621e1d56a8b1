import { EVENT_TYPES } from '../dispatch/event.js';
import type { DeadLetter, DeadLetterCursor } from '../store/store.js';
import type { Producer } from './api.js';
import type { CheckedRedriveFilter } from './redrive-filter.js';
import {
  findDeadLetter,
  planned,
  redriveFound,
  redriveMany,
  type RedriveOutcome,
  type RedriveShard,
} from './redrive.js';

/**
 * A redrive of many dead letters, a page at a time: the dead letters that match a filter are read
 * from each shard's index by end time, oldest first, {@link REDRIVE_PAGE} at a time, and the
 * shards' pages merged in end-time order; each page is redriven in one batch (see `redrive.ts`)
 * before the next is read. So a run holds one page per shard however many it redrives, and an
 * agent job gets its dead letters again in the order they ended, which is the order they were
 * sent in (one at a time per agent job).
 *
 * A filter that names no reason leaves out the dead letters that ended `ambiguous` or
 * `stuck_sending` (its intent to send was recorded, its outcome never was): their prompt may have
 * reached the agent, so sending it again is the operator's choice, made by naming that reason (or
 * their ids). A filter is no such choice.
 */

/** The reasons of a follow-up whose send could not be settled: left out unless named. */
const UNSETTLED: ReadonlySet<string> = new Set(['ambiguous', 'stuck_sending']);

/** Dead letters read from an index, and redriven in one batch, at a time. */
export const REDRIVE_PAGE = 500;

/** The pages of a redrive's answers, each answered in the order of its dead letters. */
export async function* redrivePages(
  shards: readonly RedriveShard[],
  producer: Pick<Producer, 'sendMany'>,
  filter: CheckedRedriveFilter,
): AsyncGenerator<RedriveOutcome[]> {
  const ids = filter.dispatchIds;
  if (ids) {
    for (let i = 0; i < ids.length; i += REDRIVE_PAGE)
      yield await redriveMany(shards, producer, ids.slice(i, i + REDRIVE_PAGE), filter.dryRun);
    return;
  }
  const readers = shards.map((shard) => new IndexReader(shard, filter));
  for (let left = filter.limit; left > 0;) {
    const page: { shard: RedriveShard; dead: DeadLetter }[] = [];
    while (page.length < Math.min(REDRIVE_PAGE, left)) {
      const heads = await Promise.all(readers.map((r) => r.head()));
      let oldest: number | undefined;
      for (const [i, head] of heads.entries())
        if (head && (oldest === undefined || head.finishedAt < (heads[oldest]?.finishedAt ?? 0)))
          oldest = i;
      const reader = oldest === undefined ? undefined : readers[oldest];
      const dead = reader?.take();
      if (!reader || !dead) break;
      page.push({ shard: reader.shard, dead });
    }
    if (page.length === 0) return;
    left -= page.length;
    const found = await Promise.all(
      page.map(({ shard, dead }) => findDeadLetter([shard], dead.dispatchId)),
    );
    yield filter.dryRun ? found.map(planned) : await redriveFound(producer, found);
  }
}

/** The dead letters of one shard's index that match a filter, oldest end first, a page at a time. */
class IndexReader {
  #buffer: DeadLetter[] = [];
  #next: DeadLetterCursor | undefined;
  #done = false;

  constructor(
    readonly shard: RedriveShard,
    private readonly filter: CheckedRedriveFilter,
  ) {}

  /** The oldest one not taken yet, reading the next page when needed; `undefined`: no more. */
  async head(): Promise<DeadLetter | undefined> {
    while (this.#buffer.length === 0 && !this.#done) {
      const { items, next } = await this.shard.store.followups.deadLettersFrom(
        this.filter.sinceMs ?? 0,
        this.#next,
        REDRIVE_PAGE,
      );
      this.#buffer = items.filter((d) => this.#matches(d));
      this.#next = next;
      this.#done = next === undefined;
    }
    return this.#buffer[0];
  }

  take(): DeadLetter | undefined {
    return this.#buffer.shift();
  }

  #matches(d: DeadLetter): boolean {
    const { projectId, reason } = this.filter;
    if (d.redrivenTo !== undefined) return false;
    if (projectId !== undefined && d.projectId !== projectId) return false;
    const its = d.type === EVENT_TYPES.timedOut ? 'timed_out' : d.reason;
    return reason === undefined ? !UNSETTLED.has(its) : its === reason;
  }
}
