import { Job, Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { readDispatchJob } from '../../src/consumer/worker.js';
import {
  DISPATCH_JOB_NAME,
  dispatchJobJson,
  dispatchJobOptions,
  type DispatchJobRef,
} from '../../src/store/register.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';
import { useStore } from '../support/store.js';

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
    const ref: DispatchJobRef = { dispatchId: 'd-1', projectId: 'p', jobId: 'j', ...extra };
    const opts = dispatchJobOptions(8);
    const json = dispatchJobJson(ref, opts);
    const job = new Job(queue(), DISPATCH_JOB_NAME, JSON.parse(json.data), opts, 'd-1');
    expect({ ...json, timestamp: job.timestamp }).toStrictEqual(job.asJSON());
    expect(readDispatchJob({ id: job.id, data: job.data })).toEqual({
      traceparent: undefined,
      ...ref,
    });
  });

  it('stamps the job with the time it is built', () => {
    const before = Date.now();
    const ref = { dispatchId: 'd', projectId: 'p', jobId: 'j' };
    const { timestamp } = dispatchJobJson(ref, dispatchJobOptions(1));
    expect(timestamp).toBeGreaterThanOrEqual(before);
    expect(timestamp).toBeLessThanOrEqual(Date.now());
  });
});

describe('a queued dispatch job in Redis', () => {
  const fixture = useStore('job-encoding');

  it('is a listpack hash for ids of usual length, and a worker reads its payload back', async () => {
    const { ns, producer } = fixture();
    const followUp = {
      projectId: 'acme-docs',
      jobId: 'job_01J9Z8Q4W7RXK3M2VB',
      prompt: 'x'.repeat(200),
    };
    const { dispatchId } = await producer.send(followUp);
    const jobKey = `${ns.prefix}:${QUEUE_NAMES.dispatch}:${dispatchId}`;
    const stored = await ns.redis.hgetall(jobKey);
    expect(Object.keys(stored)).toContain('opts');
    for (const [field, value] of Object.entries(stored))
      expect(Buffer.byteLength(value), field).toBeLessThanOrEqual(64);
    expect(await ns.redis.object('ENCODING', jobKey)).toBe('listpack');
    expect(readDispatchJob({ id: dispatchId, data: JSON.parse(stored['data'] ?? '') })).toEqual({
      dispatchId,
      projectId: followUp.projectId,
      jobId: followUp.jobId,
      traceparent: undefined,
    });
  });
});
