import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { DispatchStore } from '../../src/store/store.js';
import { missingRecord } from '../../src/consumer/endings.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { useNamespace } from '../support/namespace.js';

/**
 * ACQUIRE answered `missing` for a job, then a retried send of the same key registered its
 * record before the worker read it again: the accepted follow-up must stay queued and run.
 */
describe('a record registered between ACQUIRE (missing) and the orphan event', () => {
  const ns = useNamespace('missing-race');
  it('is not ended: its own job runs again, a foreign job leaves it alone', async () => {
    const n = ns();
    const producer = createProducer({ redisUrl: n.redisUrl, prefix: n.prefix });
    const connection = n.redis.duplicate();
    const queue = new Queue(QUEUE_NAMES.dispatch, { connection, prefix: n.prefix });
    try {
      const sent = await producer.send({ projectId: 'p', jobId: 'j', prompt: 'hi', key: 'k-1' });
      const { dispatchId } = sent;
      const store = new DispatchStore(n.redis, keysFor(n.prefix), {
        eventsStream: n.eventsStream,
        eventsMaxLen: 1000,
        retentionMs: 60_000,
      });
      const ctx = { store, queue, metrics: createMetrics(), logger: createLogger('silent') };
      const data = { d: dispatchId, p: 'p', j: 'j' };
      const own = { id: dispatchId, data };
      expect(await missingRecord(ctx as never, own as never)).toBe('rerun');
      const foreign = { id: 'someone-else', data };
      expect(await missingRecord(ctx as never, foreign as never)).toBe(
        'missing_record: record queued',
      );
      expect((await store.sends.get(dispatchId))?.state).toBe('queued');
      expect(await n.redis.xlen(n.eventsStream)).toBe(0);
    } finally {
      await queue.close();
      await producer.close();
      connection.disconnect();
    }
  });
});
