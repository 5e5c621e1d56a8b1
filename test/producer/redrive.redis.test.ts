import { afterEach, describe, expect, it } from 'vitest';
import { EVENT_TYPES, type EventType } from '../../src/dispatch/event.js';
import { DispatchStore } from '../../src/store/store.js';
import { createAdmin, NotRedrivableError, type Admin } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

/**
 * A redrive's rules against a real Redis: a dead letter (ended undeliverable or timed out) keeps
 * its prompt; its redrive is a new follow-up of the same project, job, prompt and meta, linked both
 * ways; a second redrive (after, or at the same time) gives the same one; anything else is refused
 * naming why, having changed nothing.
 */
describe('redrive', () => {
  const fixture = useStore('redrive');
  let admin: Admin | undefined;
  afterEach(async () => {
    await admin?.close();
    admin = undefined;
  });
  const adminOf = () => {
    const { ns } = fixture();
    admin = createAdmin({
      redisUrl: ns.redisUrl,
      prefix: ns.prefix,
      eventsStream: ns.eventsStream,
    });
    return admin;
  };

  /** Sends a follow-up and ends it with `type` (`reason`) through FINISH, as a role would. */
  async function ended(jobId: string, type: EventType, store = fixture().store, reason = 'x') {
    const { producer } = fixture();
    const { dispatchId } = await producer.send({
      projectId: 'p',
      jobId,
      prompt: `prompt of ${jobId}`,
      meta: { ticket: jobId },
    });
    const record = await store.sends.get(dispatchId);
    if (!record) throw new Error('no record');
    expect((await store.finish(record, { type, reason })).finished).toBe(true);
    return dispatchId;
  }

  const eventsOf = async (dispatchId: string) => {
    const { ns } = fixture();
    const entries = await ns.redis.xrange(ns.eventsStream, '-', '+');
    return entries.filter(([, f]) => f[f.indexOf('dispatchId') + 1] === dispatchId);
  };

  it('sends a dead letter again as a new follow-up, linked both ways; twice gives the same one', async () => {
    const { ns, store } = fixture();
    const keys = keysFor(ns.prefix);
    const old = await ended('j1', EVENT_TYPES.undeliverable, store, 'not_found');
    expect(await ns.redis.get(keys.prompt(old))).toBe('prompt of j1');
    const admin = adminOf();
    expect((await admin.deadLetters()).map((d) => d.dispatchId)).toEqual([old]);
    expect(await admin.deadLetters({ reason: 'http_400' })).toEqual([]);

    const first = await admin.redrive(old);
    expect(first).toMatchObject({ dispatchId: old, created: true });
    const fresh = await store.sends.get(first.redrivenTo);
    expect(fresh).toMatchObject({
      projectId: 'p',
      jobId: 'j1',
      prompt: 'prompt of j1',
      state: 'queued',
      key: `redrive:${old}`,
      meta: { ticket: 'j1' },
    });
    expect(await ns.redis.hget(keys.dispatch(first.redrivenTo), 'redriveOf')).toBe(old);
    expect(await ns.redis.hget(keys.dispatch(old), 'redrivenTo')).toBe(first.redrivenTo);
    // The old one keeps its one event and its end; its prompt went to the new one.
    expect(await ns.redis.hget(keys.dispatch(old), 'type')).toBe(EVENT_TYPES.undeliverable);
    expect(await eventsOf(old)).toHaveLength(1);
    expect(await ns.redis.exists(keys.prompt(old))).toBe(0);
    expect(await admin.deadLetters()).toEqual([]);

    const again = await admin.redrive(old);
    expect(again).toEqual({ dispatchId: old, redrivenTo: first.redrivenTo, created: false });
    expect(await ns.redis.llen(keys.dispatchQueue('wait'))).toBe(2);
  });

  it('two redrives of the same dead letter at once make one follow-up', async () => {
    const { ns, store } = fixture();
    const old = await ended('j2', EVENT_TYPES.timedOut, store);
    const admin = adminOf();
    const other = createAdmin({ redisUrl: ns.redisUrl, prefix: ns.prefix });
    try {
      const [a, b] = await Promise.all([admin.redrive(old), other.redrive(old)]);
      expect(a.redrivenTo).toBe(b.redrivenTo);
      expect([a.created, b.created].filter(Boolean)).toHaveLength(1);
    } finally {
      await other.close();
    }
    // The one queued before (ended) and the one new follow-up: one BullMQ job more.
    expect(await ns.redis.llen(keysFor(ns.prefix).dispatchQueue('wait'))).toBe(2);
  });

  it('refuses one not ended, one ended otherwise, an unknown one, and one whose prompt is gone', async () => {
    const { ns, producer, store } = fixture();
    const admin = adminOf();
    const refusal = (id: string) =>
      admin.redrive(id).then(
        () => undefined,
        (err: unknown) => err,
      );

    const { dispatchId: queued } = await producer.send({ projectId: 'p', jobId: 'q', prompt: 'q' });
    const notEnded = await refusal(queued);
    expect(notEnded).toBeInstanceOf(NotRedrivableError);
    expect(notEnded).toMatchObject({ code: 'not_redrivable', why: 'not_ended' });
    expect((notEnded as Error).message).toMatch(/has not ended \(queued\)/);

    const completed = await ended('c', EVENT_TYPES.completed, store);
    expect(await refusal(completed)).toMatchObject({ why: 'not_dead_letter' });
    expect(((await refusal(completed)) as Error).message).toMatch(/ended followup\.completed/);
    await admin.cancel(queued);
    expect(await refusal(queued)).toMatchObject({ why: 'not_dead_letter' });

    expect(await refusal('no-such-id')).toMatchObject({ why: 'unknown' });

    const noKeep = new DispatchStore(ns.redis, keysFor(ns.prefix), {
      eventsStream: ns.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 60_000,
      deadLetterRetentionMs: 0,
    });
    const gone = await ended('g', EVENT_TYPES.undeliverable, noKeep);
    expect(await refusal(gone)).toMatchObject({ why: 'prompt_gone' });
    // One whose kept prompt expired is no longer listed, and is refused the same way.
    const expired = await ended('e', EVENT_TYPES.undeliverable, store);
    expect((await admin.deadLetters()).map((d) => d.dispatchId)).toEqual([expired]);
    await ns.redis.del(keysFor(ns.prefix).prompt(expired));
    expect(await admin.deadLetters()).toEqual([]);
    expect(await refusal(expired)).toMatchObject({ why: 'prompt_gone' });

    // Nothing was sent for them: none is linked to a redrive.
    const keys = keysFor(ns.prefix);
    for (const id of [queued, completed, gone])
      expect(await ns.redis.hget(keys.dispatch(id), 'redrivenTo')).toBeNull();
    const many = await admin.redriveMany([completed, gone]);
    expect(many.every((a) => a instanceof NotRedrivableError)).toBe(true);
  });

  it('a bulk redrive leaves out the ambiguous and stuck_sending ones unless --reason names them', async () => {
    const { store } = fixture();
    const plain = await ended('a1', EVENT_TYPES.undeliverable, store, 'not_found');
    const ambiguous = await ended('a2', EVENT_TYPES.undeliverable, store, 'ambiguous');
    const stuck = await ended('a3', EVENT_TYPES.undeliverable, store, 'stuck_sending');
    const admin = adminOf();
    const ids = (outcomes: { dispatchId: string }[]) => outcomes.map((o) => o.dispatchId);
    expect(ids(await admin.redriveDeadLetters({ dryRun: true }))).toEqual([plain]);
    expect(ids(await admin.redriveDeadLetters({ project: 'p' }))).toEqual([plain]);
    // Named: its prompt may have reached the agent, and the operator chose to send it again.
    expect(ids(await admin.redriveDeadLetters({ reason: 'ambiguous' }))).toEqual([ambiguous]);
    expect(ids(await admin.redriveDeadLetters({ reason: 'stuck_sending' }))).toEqual([stuck]);
  });

  it('redrives by a filter a page of 500 at a time; a dry run plans the same and sends nothing', async () => {
    const { ns, producer, store } = fixture();
    const keys = keysFor(ns.prefix);
    const total = 1_100;
    const sent = await producer.sendMany(
      Array.from({ length: total }, (_, i) => ({ projectId: 'p', jobId: `j${i}`, prompt: `${i}` })),
    );
    const records = await Promise.all(sent.map((r) => store.sends.get(r.dispatchId)));
    await Promise.all(
      records.map((r) => store.finish(r!, { type: EVENT_TYPES.undeliverable, reason: 'x' })),
    );
    // All in one millisecond: the pages tell them apart by id, as the index orders them.
    await ns.redis.zadd(keys.deadLetters, ...sent.flatMap((r) => [1_000, r.dispatchId]));
    const admin = adminOf();
    const pages = async (filter: Parameters<Admin['redriveEach']>[0]) => {
      const sizes: number[] = [];
      const seen: string[] = [];
      for await (const page of admin.redriveEach(filter)) {
        sizes.push(page.length);
        seen.push(...page.map((a) => a.dispatchId));
      }
      return { sizes, seen };
    };
    const sorted = sent.map((r) => r.dispatchId).sort();
    const dry = await pages({ limit: total, dryRun: true });
    expect(dry.sizes).toEqual([500, 500, 100]);
    expect(dry.seen).toEqual(sorted);
    expect(await ns.redis.llen(keys.dispatchQueue('wait'))).toBe(total);

    const run = await pages({ limit: 5_000 });
    expect(run.sizes).toEqual([500, 500, 100]);
    expect(new Set(run.seen)).toEqual(new Set(sorted));
    expect(await ns.redis.llen(keys.dispatchQueue('wait'))).toBe(2 * total);
    expect(await ns.redis.zcard(keys.deadLetters)).toBe(0);
    // The answer of the collecting call is bounded: a limit above it is refused, naming it.
    await expect(admin.redriveDeadLetters({ limit: 10_001 })).rejects.toMatchObject({
      code: 'invalid_control',
      field: 'limit',
    });
    expect(await admin.redriveDeadLetters({ dispatchIds: sorted.slice(0, 3) })).toMatchObject(
      sorted.slice(0, 3).map((dispatchId) => ({ dispatchId, created: false })),
    );
  });

  it('keeps per-project counts of the open follow-ups through register, acquire, mark sent and finish', async () => {
    const { producer, store } = fixture();
    await producer.sendMany(
      ['a', 'b', 'c'].map((jobId) => ({ projectId: 'p', jobId, prompt: jobId })),
    );
    const counts = async () => (await store.followups.openCounts()).get('p');
    expect(await counts()).toEqual({ queued: 3, sending: 0, tracked: 0 });
    const record = (await store.followups.oldestQueued(5))[0];
    if (!record) throw new Error('nothing queued');
    const ref = { dispatchId: record.dispatchId, projectId: 'p', jobId: record.jobId };
    const verdict = await store.acquire(ref, { max: 100, windowMs: 3_600_000 }, 50, 60_000, 'T');
    expect(verdict.kind).toBe('go');
    expect(await counts()).toEqual({ queued: 2, sending: 1, tracked: 0 });
    await store.markSent(ref, 'sent', { id: ref.jobId, status: 'active' }, 1000, 'T');
    expect(await counts()).toEqual({ queued: 2, sending: 0, tracked: 1 });
    const sent = await store.sends.get(ref.dispatchId);
    await store.finish(sent!, { type: EVENT_TYPES.completed });
    expect(await counts()).toEqual({ queued: 2, sending: 0, tracked: 0 });
  });
});
