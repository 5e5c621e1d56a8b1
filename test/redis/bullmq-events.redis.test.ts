import { describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { BULLMQ_EVENTS_MAX_LEN, QUEUE_NAMES } from '../../src/redis/keys.js';
import { withNamespace } from '../support/namespace.js';

/**
 * BullMQ's own events stream is written on every add but read by nothing of ours: it is capped
 * near BULLMQ_EVENTS_MAX_LEN instead of BullMQ's 10,000, so it holds no memory per queued
 * follow-up.
 */
describe("BullMQ's own events stream", () => {
  it('stays near its cap however many follow-ups are queued', async () => {
    await withNamespace('bull-events', async (ns) => {
      const producer = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix });
      try {
        for (let b = 0; b < 10; b++) {
          await producer.sendMany(
            Array.from({ length: 100 }, (_, i) => ({
              projectId: 'p',
              jobId: `j${b * 100 + i}`,
              prompt: 'x',
            })),
          );
        }
      } finally {
        await producer.close();
      }
      const stream = `${ns.prefix}:${QUEUE_NAMES.dispatch}:events`;
      const meta = `${ns.prefix}:${QUEUE_NAMES.dispatch}:meta`;
      expect(await ns.redis.hget(meta, 'opts.maxLenEvents')).toBe(String(BULLMQ_EVENTS_MAX_LEN));
      // 1,000 adds wrote 2,000 entries; MAXLEN ~ trims whole nodes of up to 100 entries.
      const length = await ns.redis.xlen(stream);
      expect(length).toBeGreaterThan(0);
      expect(length).toBeLessThanOrEqual(3 * BULLMQ_EVENTS_MAX_LEN);
    });
  });
});
