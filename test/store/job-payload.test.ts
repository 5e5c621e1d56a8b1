import { describe, expect, it } from 'vitest';
import { readDispatchJob } from '../../src/consumer/worker.js';
import { claimedIds } from '../../src/store/jobs.js';
import { dispatchJobOptions, dispatchJobPayload } from '../../src/store/register.js';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const REF = { dispatchId: 'd-1', projectId: 'acme-docs', jobId: 'job-7', traceparent: undefined };

describe("a dispatch job's payload", () => {
  it('names the dispatch by the job id, and carries it only when the job id differs', () => {
    expect(dispatchJobPayload(REF, 'd-1')).toStrictEqual({ p: 'acme-docs', j: 'job-7' });
    expect(dispatchJobPayload(REF, 'd-1-r2')).toStrictEqual({
      p: 'acme-docs',
      j: 'job-7',
      d: 'd-1',
    });
    expect(dispatchJobPayload({ ...REF, traceparent: TRACEPARENT }, 'd-1')).toStrictEqual({
      p: 'acme-docs',
      j: 'job-7',
      t: TRACEPARENT,
    });
  });

  it('is read back as written, under the job id it was written for', () => {
    for (const [bullJobId, traceparent] of [
      ['d-1', undefined],
      ['d-1-r2', undefined],
      ['d-1-f1', TRACEPARENT],
    ] as const) {
      const ref = { ...REF, traceparent };
      const data = dispatchJobPayload(ref, bullJobId);
      expect(readDispatchJob({ id: bullJobId, data }), bullJobId).toStrictEqual(ref);
    }
  });

  it('refuses what it cannot read: no ids, bad ids, fields of another writer, no id at all', () => {
    for (const data of [
      null,
      'hello',
      {},
      { v: 0, foo: 1 },
      { v: 2, p: 'p', j: 'j' },
      { v: 1, dispatchId: '', projectId: 'p', jobId: 'j' },
      { p: '', j: 'j' },
      { p: 'p', j: 'bad\u0000id' },
      { p: 'p', j: 'j', d: '' },
      { p: 'p', j: 'j', x: 1 },
    ]) {
      expect(readDispatchJob({ id: 'd-1', data }), JSON.stringify(data)).toBeUndefined();
    }
    expect(readDispatchJob({ id: undefined, data: { p: 'p', j: 'j' } })).toBeUndefined();
  });

  it("names what an unreadable job claims, for its dispatch's event", () => {
    expect(claimedIds({ id: 'b', data: { d: 'd', p: 'p', j: 'j', x: 1 } })).toEqual({
      dispatchId: 'd',
      projectId: 'p',
      jobId: 'j',
    });
    expect(claimedIds({ id: 'b', data: { p: 'p', j: 7 } })).toEqual({
      dispatchId: 'b',
      projectId: 'p',
      jobId: '',
    });
    expect(claimedIds({ id: undefined, data: 'hello' })).toEqual({
      dispatchId: '',
      projectId: '',
      jobId: '',
    });
  });

  it('draws the retry base per job from 500 to 1,000 ms, in options of at most 64 bytes', () => {
    const bases = Array.from({ length: 2_000 }, () => {
      const opts = dispatchJobOptions(10);
      expect(JSON.stringify(opts).length).toBeLessThanOrEqual(64);
      return (opts.backoff as { delay: number }).delay;
    });
    expect(Math.min(...bases)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...bases)).toBeLessThanOrEqual(1_000);
    // Spread over the range, not one value: a fleet's retries after an outage do not align.
    expect(new Set(bases).size).toBeGreaterThan(300);
  });
});
