import { describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { PollState } from '../../src/store/poll-state.js';
import { useNamespace } from '../support/namespace.js';

/**
 * A batch REGISTER refuses (`backlog_full`) registered nothing: its refusal reply is not read as
 * per-follow-up answers (a queued count of 2 read as "revive the third id"), so no job of it is
 * looked at or given back. Observed through the store's job presence read, called through.
 */
describe('a send refused for its backlog', () => {
  const ns = useNamespace('revive-refusal');
  it('revives no job of its follow-ups', async () => {
    const n = ns();
    const looked: string[] = [];
    const read = PollState.prototype.jobPresence;
    PollState.prototype.jobPresence = function (this: PollState, ...args: Parameters<typeof read>) {
      looked.push(...args[1]);
      return read.apply(this, args);
    } as typeof read;
    const producer = createProducer({
      redisUrl: n.redisUrl,
      prefix: n.prefix,
      projectBacklogMax: 3,
    });
    try {
      const item = (i: number) => ({
        projectId: 'p',
        jobId: `j${i}`,
        prompt: `x${i}`,
        key: `k${i}`,
      });
      await producer.sendMany([item(0), item(1)]);
      // Refused with the project's queued count, 2: the answer REGISTER gives an id to revive.
      const refused = await producer.sendMany([2, 3, 4, 5].map(item)).catch((e: unknown) => e);
      expect((refused as { code?: string }).code).toBe('backlog_full');
      expect(looked).toEqual([]);
    } finally {
      PollState.prototype.jobPresence = read;
      await producer.close();
    }
  });
});
