import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { DispatchStore } from '../../src/store/store.js';
import { createProducer } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { readEvents } from '../support/events.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';
import { batchArb, inProcessOnlyMeta, inputArb } from './support/arbitraries.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { answerOf, batchAnswerOf, FuzzBooks } from './support/fuzz-books.js';
import { useProbe } from './support/quiet.js';
import { SCALE } from './support/scale.js';

/** Small, so that generated prompts cross the limit often. */
const PROMPT_MAX_BYTES = 64;

describe('5. bad input: the producer library', () => {
  const ns = useNamespace('f-fuzz-lib', { scope: 'all' });
  const producer = useOpened(
    'producer',
    () =>
      createProducer({
        redisUrl: ns().redisUrl,
        prefix: ns().prefix,
        promptMaxBytes: PROMPT_MAX_BYTES,
      }),
    'all',
  );
  const probe = useProbe(ns, 'all');

  it('refuses ids and keys that are not well-formed Unicode: Redis would store them altered', async () => {
    // Redis stores UTF-8: a lone surrogate becomes U+FFFD, so these two keys would name one
    // dispatch, and the second follow-up would be answered "deduplicated" and never sent.
    const first = await answerOf(() =>
      producer().send({ projectId: 'p', jobId: 'j1', prompt: 'one', key: 'k\ud800' }),
    );
    const second = await answerOf(() =>
      producer().send({ projectId: 'p', jobId: 'j2', prompt: 'two', key: 'k\udc00' }),
    );
    const job = await answerOf(() =>
      producer().send({ projectId: 'p', jobId: 'j\ud83d', prompt: 'x' }),
    );
    expect([first, second, job]).toMatchObject([
      { kind: 'rejected', fields: ['key'] },
      { kind: 'rejected', fields: ['key'] },
      { kind: 'rejected', fields: ['jobId'] },
    ]);
  });

  it('stores meta exactly as sent, even a key named __proto__, and the event carries it', async () => {
    // JSON.parse makes "__proto__" an own property; rebuilding meta key by key with assignment
    // would set a prototype instead, and the key would vanish from the record and the event.
    const text = '{"ticket": {"__proto__": {"x": 1}, "id": 7}, "__proto__": 1}';
    const meta = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(meta)).toEqual(['ticket', '__proto__']);
    // A prefix of its own inside the namespace, so the fuzzing's audit below counts only its own.
    const prefix = `${ns().prefix}:proto`;
    const own = createProducer({ redisUrl: ns().redisUrl, prefix });
    const { dispatchId } = await own.send({ projectId: 'p', jobId: 'j', prompt: 'x', meta });
    await own.close();
    const stored = await ns().redis.hget(keysFor(prefix).dispatch(dispatchId), 'meta');
    expect(stored).toBe(JSON.stringify(meta));
    expect(JSON.parse(stored ?? '')).toEqual(JSON.parse(text));

    const stream = `${prefix}:events`;
    const store = new DispatchStore(ns().redis, keysFor(prefix), {
      eventsStream: stream,
      eventsMaxLen: 100,
      retentionMs: 60_000,
    });
    const record = await store.sends.get(dispatchId);
    if (!record) throw new Error('the record is missing');
    await store.finish(record, { type: EVENT_TYPES.undeliverable, reason: 'bad_request' });
    const [event] = await readEvents(ns().redis, stream);
    expect(JSON.stringify(event?.event['meta'])).toBe(JSON.stringify(meta));
  });

  it('send and sendMany accept exactly the valid inputs and name the field of every invalid one', async (ctx) => {
    const watch = stopwatch();
    const books = new FuzzBooks(PROMPT_MAX_BYTES);
    const sendInput = fc.oneof(
      { arbitrary: inputArb(PROMPT_MAX_BYTES), weight: 30 },
      {
        arbitrary: inProcessOnlyMeta.map((meta) => ({
          projectId: 'p',
          jobId: 'j',
          prompt: 'x',
          meta,
        })),
        weight: 1,
      },
      { arbitrary: fc.constant(undefined), weight: 1 },
    );
    await fc.assert(
      fc.asyncProperty(sendInput, async (input) => {
        books.check(input, await answerOf(() => producer().send(input as FollowUpInput)));
      }),
      { numRuns: SCALE.fuzz.sends },
    );
    const sends = books.tried;
    await fc.assert(
      fc.asyncProperty(batchArb(PROMPT_MAX_BYTES, 20), async (batch) => {
        const answer = await batchAnswerOf(() => producer().sendMany(batch as FollowUpInput[]));
        books.checkBatch(batch, answer);
      }),
      { numRuns: SCALE.fuzz.batches },
    );
    const notAnArray = await batchAnswerOf(() =>
      producer().sendMany('nope' as unknown as FollowUpInput[]),
    );
    await books.audit(ns().redis, ns().prefix, await probe().pendingJobs());

    recordFigures(ctx, {
      category: 5,
      scenario: `producer library: ${sends} generated inputs to send(), ${SCALE.fuzz.batches} generated batches of 1–20 to sendMany() (PROMPT_MAX_BYTES ${PROMPT_MAX_BYTES})`,
      tried: books.tried,
      faults: 'generated inputs, valid and invalid',
      lost: books.refusedValid,
      duplicated: books.enqueuedInvalid,
      leaked: 0,
      notes: [
        `valid ${books.valid} (accepted ${books.firsts.size} distinct dispatches, ${books.conflicts} refused as key conflicts), invalid ${books.invalid}`,
        `rule violations ${books.violations.length}${books.violations.length ? `: ${books.sample(3).join(' | ')}` : ''}`,
        `a batch that is not an array: ${notAnArray.kind === 'rejected' ? notAnArray.problems.map((p) => p.field).join(', ') : notAnArray.kind}`,
      ],
      durationMs: watch(),
    });
    expect(books.sample(10)).toEqual([]);
    expect(notAnArray).toMatchObject({ kind: 'rejected', problems: [{ field: '(batch)' }] });
  });
});
