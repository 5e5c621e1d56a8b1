import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkFollowUp } from '../../src/dispatch/followup.js';
import { inputArb, validishArb } from '../faults/support/arbitraries.js';

const PROMPT_MAX_BYTES = 64;

/**
 * The same input, with a prototype of its own (a plain object with nothing enumerable): the schema
 * reads it as it reads the original, and the check of plain objects leaves it to the schema.
 */
function throughTheSchema(input: unknown): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  return Object.create({}, Object.getOwnPropertyDescriptors(input)) as unknown;
}

/**
 * Both answers the same, own properties set to `undefined` included (`toStrictEqual` would also
 * compare the `constructor` property, which a generated meta may set).
 */
function expectSame(input: unknown, index?: number): void {
  const answer = checkFollowUp(input, PROMPT_MAX_BYTES, index);
  const schemas = checkFollowUp(throughTheSchema(input), PROMPT_MAX_BYTES, index);
  expect(answer).toEqual(schemas);
  expect(isDeepStrictEqual(answer, schemas)).toBe(true);
}

/**
 * `checkFollowUp` answers a plain object of valid fields without its schema; these compare that
 * answer with the schema's own, for the fuzzing's generated inputs.
 */
describe('checkFollowUp of plain objects', () => {
  it.each([
    ['generated inputs, valid and not', inputArb(PROMPT_MAX_BYTES)],
    ['nearly always valid inputs', validishArb(PROMPT_MAX_BYTES)],
  ])('answers what the schema answers: %s', (_, arbitrary) => {
    fc.assert(fc.property(arbitrary, fc.option(fc.nat(), { nil: undefined }), expectSame), {
      numRuns: 2_000,
    });
  });

  it.each([
    ['a null prototype', Object.assign(Object.create(null) as object, VALID)],
    [
      'an own __proto__ key',
      JSON.parse('{"projectId":"p","jobId":"j","prompt":"x","__proto__":1}'),
    ],
    ['an undefined key and meta', { ...VALID, key: undefined, meta: undefined }],
    ['a prompt at the limit', { ...VALID, prompt: 'é'.repeat(PROMPT_MAX_BYTES / 2) }],
    ['a prompt over the limit', { ...VALID, prompt: 'é'.repeat(PROMPT_MAX_BYTES / 2) + 'e' }],
  ])('answers what the schema answers: %s', (_, input: unknown) => expectSame(input));

  it('refuses a key its prototype adds, as the schema does', () => {
    const input = Object.assign(Object.create({ extra: 1 }) as object, VALID);
    expect(checkFollowUp(input, PROMPT_MAX_BYTES)).toMatchObject({
      ok: false,
      problems: [{ field: 'extra' }],
    });
  });
});

const VALID = { projectId: 'p', jobId: 'j', prompt: 'x' };
