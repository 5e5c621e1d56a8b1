import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as errors from '../src/errors.js';
import * as library from '../src/index.js';
import { AGENT_ERROR_CODES } from '../src/agent-api/errors.js';

const ROOT = join(import.meta.dirname, '..');

type ErrorClass = abstract new (...args: never[]) => Error;

/** One instance of each error class, and of each variant where a class has several codes. */
const SAMPLES: Record<string, () => Error[]> = {
  ConfigError: () => [new errors.ConfigError([{ setting: 'POLL_INTERVAL', message: 'bad' }])],
  KeyFileError: () => [new errors.KeyFileError('empty')],
  RedisAddressError: () => [new errors.RedisAddressError('bad host')],
  RedisServerMissingError: () => [new errors.RedisServerMissingError('redis-server')],
  LayoutError: () => [new errors.LayoutError('DISPATCH_SHARDS', 'differs')],
  NotDurableError: () => [new errors.NotDurableError('WAITAOF fell short')],
  InvalidFollowUpError: () => [
    new errors.InvalidFollowUpError([{ field: 'prompt', message: 'is empty' }]),
  ],
  StoreItemError: () => [new errors.StoreItemError('acquire', 'k', 'not a hash')],
  CursorError: () => [new errors.CursorError('malformed')],
  CursorGapError: () => [
    new errors.CursorGapError(0, 'trimmed', '1-0'),
    new errors.CursorGapError(0, 'ahead', '1-0'),
  ],
  IdempotencyConflictError: () => [new errors.IdempotencyConflictError([], [])],
  RedisUnavailableError: () => [new errors.RedisUnavailableError(5_000)],
  RedisCommandError: () => [new errors.RedisCommandError('WRONGTYPE', new Error('WRONGTYPE'))],
  ClaimReleasedError: () => [new errors.ClaimReleasedError([])],
  BacklogFullError: () => [new errors.BacklogFullError('p1', 100, 1, 36_000)],
  InvalidControlError: () => [new errors.InvalidControlError('limit', 'malformed')],
  UnknownDispatchError: () => [new errors.UnknownDispatchError('d1')],
  NotCancellableError: () => [new errors.NotCancellableError('d1', 'sent')],
  NotRedrivableError: () => [new errors.NotRedrivableError('d1', 'not_ended', 'it has not ended')],
  AgentApiError: () =>
    AGENT_ERROR_CODES.map((code) => new errors.AgentApiError(code, { code, ambiguous: false })),
  ResponseTooLargeError: () => [new errors.ResponseTooLargeError()],
  WriteDeadlineError: () => [new errors.WriteDeadlineError(5)],
  InvalidWebhookError: () => [new errors.InvalidWebhookError('url', 'not https')],
  WebhookAttemptError: () => [new errors.WebhookAttemptError('answered 500', 500)],
  UsageError: () => [new errors.UsageError('unknown option --x')],
};

/** `name` as callers saw it before the base existed: a subclass may keep its parent's. */
const NAME: Record<string, string> = { ClaimReleasedError: 'RedisUnavailableError' };

const classes = (Object.entries(errors) as [string, unknown][]).filter(
  (entry): entry is [string, ErrorClass] =>
    typeof entry[1] === 'function' && entry[1].prototype instanceof Error,
);

describe('the error family', () => {
  it('has a sample here of every class src/errors.ts exports', () => {
    expect(classes.map(([name]) => name).sort()).toEqual(
      ['AgentDispatchError', ...Object.keys(SAMPLES)].sort(),
    );
  });

  it.each(Object.keys(SAMPLES))(
    '%s extends AgentDispatchError, keeps its name and has a code',
    (name) => {
      const cls = (errors as unknown as Record<string, ErrorClass>)[name] as ErrorClass;
      for (const err of SAMPLES[name]?.() ?? []) {
        expect(err).toBeInstanceOf(cls);
        expect(err).toBeInstanceOf(errors.AgentDispatchError);
        expect(err).toBeInstanceOf(Error);
        expect(err.name).toBe(NAME[name] ?? name);
        expect((err as errors.AgentDispatchError).code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      }
    },
  );

  it('gives each code to one class only', () => {
    const owners = new Map<string, Set<string>>();
    for (const [name, sample] of Object.entries(SAMPLES))
      for (const err of sample()) {
        const code = (err as errors.AgentDispatchError).code;
        owners.set(code, new Set([...(owners.get(code) ?? []), name]));
      }
    const shared = [...owners].filter(([, names]) => names.size > 1);
    expect(shared).toEqual([]);
  });

  it('is exported whole by the library entry', () => {
    for (const [name, cls] of classes)
      expect((library as Record<string, unknown>)[name], name).toBe(cls);
  });

  it('holds every error class declared in src/', () => {
    const declared = sourceFiles(join(ROOT, 'src')).flatMap((file) =>
      [
        ...readFileSync(file, 'utf8').matchAll(
          /^export (?:abstract )?class (\w+) extends \w*Error/gm,
        ),
      ].map((m) => m[1]),
    );
    expect(declared.sort()).toEqual(classes.map(([name]) => name).sort());
  });

  it('is documented in docs/errors.md: one row per code, with its class', () => {
    const rows = [
      ...readFileSync(join(ROOT, 'docs/errors.md'), 'utf8').matchAll(
        /^\| `(\w+)`\s*\| `(\w+)`\s*\|/gm,
      ),
    ].map((m) => `${m[1]} ${m[2]}`);
    const expected = Object.entries(SAMPLES).flatMap(([name, sample]) =>
      sample().map((err) => `${(err as errors.AgentDispatchError).code} ${name}`),
    );
    expect(rows.sort()).toEqual(expected.sort());
  });
});

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  );
}
