import fc from 'fast-check';
import { ID_MAX, META_MAX_BYTES, META_MAX_DEPTH, utf8Bytes } from './oracle.js';

/**
 * Generators of follow-up inputs, valid and not, for the fuzzing of every entry point. Each field
 * mixes ordinary values with the edges of its rules (length, bytes, control characters, lone
 * surrogates, blanks, wrong types); the oracle, not the generator, says what is valid.
 */

const notAString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
);
const controlChar = fc
  .integer({ min: 0, max: 0x9f })
  .filter((c) => c < 0x20 || c >= 0x7f)
  .map((c) => String.fromCharCode(c));
const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
const plainId = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:/ -]{0,40}$/);
const edgeId = fc.constantFrom(
  '',
  ' ',
  '\t',
  '\u00a0\u3000',
  'a'.repeat(ID_MAX),
  'a'.repeat(ID_MAX + 1),
  '😀'.repeat(ID_MAX / 2),
  '😀'.repeat(ID_MAX / 2 + 1),
  'x\u0000',
  'x\u007f',
  '\u0085',
  'a\u2028b',
  '\ufeff',
  '../..',
  '%2F',
  '\ud83d',
);
const spliced = fc
  .tuple(plainId, fc.oneof(controlChar, loneSurrogate), fc.string({ maxLength: 5 }))
  .map(([a, x, b]) => `${a}${x}${b}`);

/** A project id, job id or key. */
export const idArb = fc.oneof(
  { arbitrary: plainId, weight: 10 },
  { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }), weight: 3 },
  { arbitrary: edgeId, weight: 2 },
  { arbitrary: spliced, weight: 1 },
  { arbitrary: notAString, weight: 1 },
);

/** A prompt, around a limit of `maxBytes` UTF-8 bytes. */
export function promptArb(maxBytes: number): fc.Arbitrary<unknown> {
  const nearLimit = fc
    .tuple(fc.constantFrom('x', 'é', '€', '😀'), fc.integer({ min: -2, max: 2 }))
    .map(([ch, d]) => ch.repeat(Math.max(1, Math.floor(maxBytes / utf8Bytes(ch)) + d)));
  return fc.oneof(
    { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }), weight: 10 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 12 }), weight: 2 },
    { arbitrary: nearLimit, weight: 3 },
    { arbitrary: spliced, weight: 1 },
    { arbitrary: notAString, weight: 1 },
  );
}

const metaArb = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 6 },
  {
    arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), {
      maxKeys: 4,
    }),
    weight: 4,
  },
  {
    // Keys named __proto__, at the top and inside: stored and echoed like any other key.
    arbitrary: fc
      .constantFrom(
        '{"__proto__": 1}',
        '{"a": {"__proto__": {"x": [1]}}, "__proto__": null}',
        '{"constructor": {"prototype": 1}}',
      )
      .map((text) => JSON.parse(text) as unknown),
    weight: 1,
  },
  {
    // Nested near the depth limit, and far past it (a stack overflow once).
    arbitrary: fc
      .constantFrom(META_MAX_DEPTH - 1, META_MAX_DEPTH, 1_500)
      .map((depth) => JSON.parse(`{"x":${'['.repeat(depth)}${']'.repeat(depth)}}`) as unknown),
    weight: 1,
  },
  {
    // {"pad":"xxx…"} of META_MAX_BYTES - 3 to + 3 bytes.
    arbitrary: fc
      .integer({ min: META_MAX_BYTES - 3, max: META_MAX_BYTES + 3 })
      .map((n) => ({ pad: 'x'.repeat(n - 10) })),
    weight: 1,
  },
  {
    arbitrary: fc.constantFrom<unknown>([], 'text', 42, null, { a: [1, { b: null }] }),
    weight: 1,
  },
);

const extraArb = fc.oneof(
  { arbitrary: fc.constant({}), weight: 15 },
  { arbitrary: fc.constantFrom({ foo: 1 }, { projectID: 'p' }, { constructor: 'x' }), weight: 1 },
);

/** One input as a producer might pass it. `promptMaxBytes` centres the prompt sizes. */
export function inputArb(promptMaxBytes: number): fc.Arbitrary<unknown> {
  const full = fc
    .record({
      projectId: idArb,
      jobId: idArb,
      prompt: promptArb(promptMaxBytes),
      key: fc.option(idArb, { freq: 3, nil: undefined }),
      meta: metaArb,
      extra: extraArb,
    })
    .map(({ extra, key, meta, ...rest }) => ({
      ...rest,
      ...(key === undefined ? {} : { key }),
      ...(meta === undefined ? {} : { meta }),
      ...extra,
    }));
  const partial = fc.record(
    { projectId: idArb, jobId: idArb, prompt: promptArb(promptMaxBytes) },
    { requiredKeys: [] },
  );
  return fc.oneof(
    { arbitrary: full, weight: 20 },
    { arbitrary: partial, weight: 2 },
    { arbitrary: fc.constantFrom<unknown>(null, 'text', 42, [], [{}], true), weight: 1 },
  );
}

/** Inputs that are nearly always valid: for batches that should go through whole. */
export function validishArb(promptMaxBytes: number): fc.Arbitrary<unknown> {
  return fc.record({
    projectId: plainId,
    jobId: plainId,
    prompt: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: promptMaxBytes }),
  });
}

/** A batch: half the time all validish, half the time anything. */
export function batchArb(promptMaxBytes: number, maxLength: number): fc.Arbitrary<unknown[]> {
  return fc.oneof(
    fc.array(validishArb(promptMaxBytes), { minLength: 1, maxLength }),
    fc.array(inputArb(promptMaxBytes), { minLength: 1, maxLength }),
  );
}

/** Functions, `undefined`, `NaN` and class instances: only an in-process caller can pass these. */
export const inProcessOnlyMeta = fc.constantFrom<unknown>(
  { a: Number.NaN },
  { a: Number.POSITIVE_INFINITY },
  { a: undefined },
  { d: new Date(0) },
  { f: () => 1 },
  new Map([['a', 1]]),
);
