import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

/**
 * A redrive's link (`followups.linkRedrive`) writes only to records that exist: a dead letter
 * whose record expired between its read and the link must not come back as a key with no TTL.
 */
describe('the link of a redrive', () => {
  const fixture = useStore('redrive-link');

  async function deadLetter(jobId: string): Promise<string> {
    const { producer, store } = fixture();
    const { dispatchId } = await producer.send({ projectId: 'p', jobId, prompt: 'x' });
    const record = await store.sends.get(dispatchId);
    if (!record) throw new Error('no record');
    await store.finish(record, { type: EVENT_TYPES.undeliverable, reason: 'x' });
    return dispatchId;
  }

  it("links both records and keeps the old one's TTL", async () => {
    const { ns, store } = fixture();
    const keys = keysFor(ns.prefix);
    const old = await deadLetter('a');
    const { dispatchId: next } = await fixture().producer.send({
      projectId: 'p',
      jobId: 'a',
      prompt: 'x',
    });
    await store.followups.linkRedrive(old, next);
    expect(await ns.redis.hget(keys.dispatch(old), 'redrivenTo')).toBe(next);
    expect(await ns.redis.hget(keys.dispatch(next), 'redriveOf')).toBe(old);
    expect(await ns.redis.pttl(keys.dispatch(old))).toBeGreaterThan(0);
    expect(await ns.redis.exists(keys.prompt(old))).toBe(0);
    expect(await ns.redis.zscore(keys.deadLetters, old)).toBeNull();
  });

  it('an old record that expired mid-redrive is not made again', async () => {
    const { ns, store } = fixture();
    const keys = keysFor(ns.prefix);
    const old = await deadLetter('b');
    const { dispatchId: next } = await fixture().producer.send({
      projectId: 'p',
      jobId: 'b',
      prompt: 'x',
    });
    // Its retention ran out between the redrive's read and its link.
    await ns.redis.del(keys.dispatch(old));
    await store.followups.linkRedrive(old, next);
    expect(await ns.redis.exists(keys.dispatch(old))).toBe(0);
    expect(await ns.redis.zscore(keys.deadLetters, old)).toBeNull();
    expect(await ns.redis.exists(keys.prompt(old))).toBe(0);
    // Nor is a new record that is gone: a link is no record.
    await ns.redis.del(keys.dispatch(next));
    const other = await deadLetter('c');
    await store.followups.linkRedrive(other, next);
    expect(await ns.redis.exists(keys.dispatch(next))).toBe(0);
    expect(await ns.redis.hget(keys.dispatch(other), 'redrivenTo')).toBe(next);
  });
});
