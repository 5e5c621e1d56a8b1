import { Queue, Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { roleOf } from '../../src/runtime/role.js';
import { within } from '../../src/time/deadline.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { eventually, useNamespace } from '../support/namespace.js';

/**
 * A role's shutdown is bounded by SHUTDOWN_TIMEOUT even when a job never ends. BullMQ's
 * `close(true)` after a `close()` that is still waiting returns that same wait, so forcing it
 * the BullMQ way alone would wait for the job for ever.
 */
describe('a role whose job never ends', () => {
  const ns = useNamespace('shutdown');

  it('stops within SHUTDOWN_TIMEOUT and still runs its closing steps', async () => {
    const { redisUrl, prefix } = ns();
    const connection = { url: redisUrl, maxRetriesPerRequest: null };
    const queue = new Queue('stuck', { connection, prefix });
    const worker = new Worker('stuck', () => new Promise<never>(() => {}), {
      connection,
      prefix,
    });
    let closedAfter = false;
    try {
      await queue.add('job', {});
      await eventually(async () => ((await queue.getActiveCount()) === 1 ? true : undefined), {
        what: 'the job to be active',
      });
      const role = roleOf({
        name: 'worker',
        config: ns().config({ SHUTDOWN_TIMEOUT: '300ms' }),
        logger: createLogger('silent'),
        worker,
        after: [
          async () => {
            closedAfter = true;
          },
        ],
      });
      const started = Date.now();
      const outcome = await within(
        role.close().then(() => 'closed'),
        5_000,
        () => 'still waiting after 5 s',
      );
      expect(outcome).toBe('closed');
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(closedAfter).toBe(true);
    } finally {
      await worker.disconnect().catch(() => {});
      await queue.close();
    }
  });
});
