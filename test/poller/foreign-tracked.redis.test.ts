import { describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { readEvents } from '../support/events.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';

/**
 * Tracked ids without a record: one in the form of a dispatch id (a lost record) ends with its
 * `missing_record` event; ids no producer makes (hand-added, another program's) are untracked
 * with no event.
 */
describe('the poller, for a tracked id without a record', () => {
  const { ns, start } = useService('foreign-tracked');

  it('publishes the orphan event only for a dispatch id', async () => {
    start({}, { worker: false });
    const keys = keysFor(ns().prefix);
    const lost = `k-${'a'.repeat(40)}`;
    await ns().redis.zadd(keys.tracked, 0, 'not-a-dispatch', 0, 'other-prefix:abc', 0, lost);
    await eventually(async () => (await ns().redis.zcard(keys.tracked)) === 0 || undefined, {
      what: 'the tracked set emptied',
    });
    const events = await readEvents(ns().redis, ns().eventsStream);
    expect(events.map((e) => e.dispatchId)).toEqual([lost]);
  }, 20_000);
  it("ends a creation's lost record job.undeliverable, read from its BullMQ job", async () => {
    const producerOnly = start({}, { worker: false, poller: false });
    const keys = keysFor(ns().prefix);
    const c = await producerOnly.producer.create({ projectId: 'p1', prompt: 'c' });
    await ns().redis.zadd(keys.tracked, 0, c.dispatchId);
    await ns().redis.del(keys.dispatch(c.dispatchId));
    start({}, { worker: false });
    await eventually(async () => (await ns().redis.zcard(keys.tracked)) === 0 || undefined, {
      what: 'the tracked set emptied',
    });
    const [event] = await readEvents(ns().redis, ns().eventsStream);
    expect(event).toMatchObject({ type: 'job.undeliverable', dispatchId: c.dispatchId });
    expect(event).toMatchObject({ projectId: 'p1', jobId: '' });
  }, 20_000);
});
