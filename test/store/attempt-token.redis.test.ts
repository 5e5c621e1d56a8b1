import { beforeEach, describe, expect, it } from 'vitest';
import type { DispatchRef } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

const RATE = { max: 5, windowMs: 60_000 };
const JOB = { id: 'j', status: 'active', prLink: null };

describe('attempt tokens (ACQUIRE, MARK_SENT, REQUEUE)', () => {
  const fixture = useStore('token');
  let ref: DispatchRef;
  const keys = () => keysFor(fixture().ns.prefix);
  const field = (name: string) => fixture().ns.redis.hget(keys().dispatch(ref.dispatchId), name);
  const budgetEntries = () => fixture().ns.redis.zcard(keys().budget('p'));

  beforeEach(async () => {
    const { dispatchId } = await fixture().producer.send({
      projectId: 'p',
      jobId: 'j',
      prompt: 'hello',
    });
    ref = { dispatchId, projectId: 'p', jobId: 'j' };
  });

  const acquire = (token: string) => fixture().store.acquire(ref, RATE, 20, 60_000, token);

  it('answers go again to the same token, spending no budget and no attempt', async () => {
    // Written within the margin (twice the tolerance) of its grant, or given back.
    const go = { kind: 'go', attempt: 1, prompt: 'hello', probe: false, to: 'j' };
    expect(await acquire('A')).toEqual({ ...go, writeWithinMs: 40 });
    const sendingAt = Number(await field('sendingAt'));
    // ioredis resends an ACQUIRE whose reply was lost with its connection: the same token.
    // Again: what is left of the margin since the grant (a slot may have been spent a tolerance late).
    const again = await acquire('A');
    expect(again).toMatchObject(go);
    expect(again.kind === 'go' && (again.writeWithinMs ?? Infinity) <= 20).toBe(true);
    expect(await field('attempts')).toBe('1');
    expect(await budgetEntries()).toBe(1);
    expect(Number(await field('sendingAt'))).toBe(sendingAt);
    expect(await field('attemptToken')).toBe('A');
  });

  it('answers sending to another token, naming the attempt that holds it', async () => {
    await acquire('A');
    expect(await acquire('B')).toEqual({
      kind: 'sending',
      sendingAt: Number(await field('sendingAt')),
      attemptToken: 'A',
    });
    expect(await field('attempts')).toBe('1');
    expect(await budgetEntries()).toBe(1);
  });

  it('records an outcome only for the current token', async () => {
    await acquire('A');
    expect(await fixture().store.markSent(ref, 'sent', JOB, 1_000, 'B')).toBe('stale');
    expect(await field('state')).toBe('sending');
    expect(await fixture().store.tracking.requeue(ref, 1, 'B', true)).toBe('stale');
    expect(await field('state')).toBe('sending');
    expect(await budgetEntries()).toBe(1);

    expect(await fixture().store.markSent(ref, 'sent', JOB, 1_000, 'A')).toBe('marked');
    expect(await field('state')).toBe('sent');
    // A MARK_SENT run twice (its reply lost, resent) is answered as done, and changes nothing.
    expect(await fixture().store.markSent(ref, 'sent', JOB, 1_000, 'A')).toBe('marked');
    expect(await fixture().store.tracking.requeue(ref, 1, 'A', true)).toBe('moved-on');
    expect(await field('state')).toBe('sent');
  });

  it('turns unsettled into sent when the current attempt brings a definite 200', async () => {
    await acquire('A');
    // A rerun (token B) found A's send in doubt and marked it unsettled on A's behalf.
    expect(await fixture().store.markSent(ref, 'unsettled', undefined, 1_000, 'A')).toBe('marked');
    expect(await fixture().store.markSent(ref, 'sent', JOB, 1_000, 'B')).toBe('stale');
    expect(await field('state')).toBe('unsettled');
    expect(await fixture().store.markSent(ref, 'sent', JOB, 1_000, 'A')).toBe('marked');
    expect(await field('state')).toBe('sent');
    expect(await field('lastStatus')).toBe('active');
    expect(await field('seenActive')).toBe('1');
  });

  it('requeues for the current token only, and a new attempt takes a new token', async () => {
    await acquire('A');
    expect(await fixture().store.tracking.requeue(ref, 1, 'A', true)).toBe(0);
    expect(await field('state')).toBe('queued');
    expect(await budgetEntries()).toBe(0);
    // A's late answer finds its attempt over.
    expect(await fixture().store.markSent(ref, 'sent', JOB, 1_000, 'A')).toBe('moved-on');
    expect(await acquire('C')).toEqual({
      kind: 'go',
      attempt: 2,
      prompt: 'hello',
      probe: false,
      writeWithinMs: 40,
      to: 'j',
    });
    expect(await fixture().store.markSent(ref, 'sent', JOB, 1_000, 'A')).toBe('stale');
    expect(await field('state')).toBe('sending');
  });
});
