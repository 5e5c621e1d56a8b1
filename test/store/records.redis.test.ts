import { describe, expect, it } from 'vitest';
import { useStore } from '../support/store.js';

describe("the poller's read of records (getMany)", () => {
  const fixture = useStore('records');

  it('reads every field of each record but its prompt, whatever the prompt weighs', async () => {
    const { producer, store } = fixture();
    const [first, second] = await producer.sendMany([
      { projectId: 'p', jobId: 'j', prompt: 'x'.repeat(60_000), key: 'k1', meta: { n: 1 } },
      { projectId: 'p', jobId: 'k', prompt: 'short' },
    ]);
    const ids = [first?.dispatchId as string, second?.dispatchId as string, 'no-such-dispatch'];
    const read = await store.sends.getMany(ids);
    const whole = await Promise.all(ids.map((id) => store.sends.get(id)));
    expect(whole[0]?.prompt).toHaveLength(60_000);
    expect(read[0]).toEqual({ ...whole[0], prompt: undefined });
    expect(read[1]).toEqual({ ...whole[1], prompt: undefined });
    expect(read[0]).toMatchObject({ key: 'k1', meta: { n: 1 }, state: 'queued', attempts: 0 });
    expect(read[2]).toBeUndefined();
  });
});
