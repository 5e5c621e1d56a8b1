import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import type { DispatchRecord } from '../../src/dispatch/record.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

const RATE = { max: 100, windowMs: 3_600_000 };
const PROMPT = 'Please also update the changelog. '.repeat(5);

describe('the prompt under its own key', () => {
  const fixture = useStore('prompt-key');

  /** Sends one follow-up through the producer; its record and the keys it lives under. */
  async function registered(prompt = PROMPT) {
    const { ns, producer, store } = fixture();
    const keys = keysFor(ns.prefix);
    const { dispatchId } = await producer.send({ projectId: 'p', jobId: 'j', prompt });
    const ref = { dispatchId, projectId: 'p', jobId: 'j' };
    return {
      ns,
      store,
      ref,
      recordKey: keys.dispatch(dispatchId),
      promptKey: keys.prompt(dispatchId),
    };
  }

  it('keeps the record a listpack: the prompt is its own key, read back with the record', async () => {
    const { ns, store, ref, recordKey, promptKey } = await registered();

    expect(PROMPT.length).toBeGreaterThan(64);
    expect(await ns.redis.get(promptKey)).toBe(PROMPT);
    expect(await ns.redis.hexists(recordKey, 'prompt')).toBe(0);
    expect(await ns.redis.object('ENCODING', recordKey)).toBe('listpack');
    expect((await store.sends.get(ref.dispatchId))?.prompt).toBe(PROMPT);
  });

  it('sends the prompt of its key, and FINISH deletes the key with the record kept (a dead letter: kept for a redrive)', async () => {
    const { ns, store, ref, recordKey, promptKey } = await registered();

    const verdict = await store.acquire(ref, RATE, 1_000, 1_000, 'attempt-1');
    expect(verdict).toMatchObject({ kind: 'go', prompt: PROMPT });
    const record = (await store.sends.get(ref.dispatchId)) as DispatchRecord;
    const ending = { type: EVENT_TYPES.completed };
    expect((await store.finish(record, ending)).finished).toBe(true);

    expect(await ns.redis.exists(promptKey)).toBe(0);
    expect(await ns.redis.hget(recordKey, 'state')).toBe('done');

    // An undeliverable one keeps its prompt, expiring no later than its record.
    const other = await registered();
    const dead = (await store.sends.get(other.ref.dispatchId)) as DispatchRecord;
    const undeliverable = { type: EVENT_TYPES.undeliverable, reason: 'test' };
    expect((await store.finish(dead, undeliverable)).finished).toBe(true);
    expect(await ns.redis.get(other.promptKey)).toBe(PROMPT);
    const ttl = await ns.redis.pttl(other.promptKey);
    expect(ttl).toBeGreaterThan(0);
    // The fixture's DISPATCH_RETENTION: 60 s.
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('deletes the prompt of a record deleted by hand when its orphan event is published', async () => {
    const { ns, store, ref, recordKey, promptKey } = await registered();
    await ns.redis.del(recordKey);

    const orphan = { bullJobId: ref.dispatchId, dispatchId: ref.dispatchId };
    expect(await store.tracking.publishOrphan(orphan, ref, 'missing_record')).toBe('published');

    expect(await ns.redis.exists(promptKey)).toBe(0);
  });

  it('deletes the prompt of a record deleted by hand when the repair sweep drops it', async () => {
    const { ns, store, ref, recordKey, promptKey } = await registered();
    await ns.redis.del(recordKey);

    const { dispatches } = await store.open.first(10);
    expect(dispatches).toMatchObject([{ dispatchId: ref.dispatchId, state: undefined }]);
    await store.open.drop(dispatches);

    expect(await ns.redis.exists(promptKey)).toBe(0);
    expect(await store.open.count()).toBe(0);
  });
});
