import { Job, Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import {
  DISPATCH_JOB_NAME,
  dispatchJobJson,
  dispatchJobOptions,
  type DispatchJobData,
} from '../../src/runtime/jobs.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

/**
 * The producer hands BullMQ's `addJobToTransaction` a job it builds itself (`dispatchJobJson`)
 * instead of `new Job(...).asJSON()`: the two must agree, so that a BullMQ upgrade that changes
 * what a job holds fails here, not in a queue.
 */
describe('dispatchJobJson', () => {
  const ns = useNamespace('job-json');
  const queue = useOpened(
    'queue',
    () =>
      new Queue(QUEUE_NAMES.dispatch, { connection: ns().redis.duplicate(), prefix: ns().prefix }),
  );

  it.each([
    ['untraced', {}],
    ['traced', { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }],
  ])('is what asJSON() of a new Job answers (%s)', (_, extra) => {
    const data: DispatchJobData = { v: 1, dispatchId: 'd-1', projectId: 'p', jobId: 'j', ...extra };
    const job = new Job(queue(), DISPATCH_JOB_NAME, data, dispatchJobOptions(8), 'd-1');
    expect(dispatchJobJson(data, 8, job.timestamp)).toStrictEqual(job.asJSON());
  });

  it('stamps the job with the time it is built', () => {
    const before = Date.now();
    const { timestamp } = dispatchJobJson({ v: 1, dispatchId: 'd', projectId: 'p', jobId: 'j' }, 1);
    expect(timestamp).toBeGreaterThanOrEqual(before);
    expect(timestamp).toBeLessThanOrEqual(Date.now());
  });
});
