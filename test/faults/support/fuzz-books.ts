import type { Redis } from 'ioredis';
import { parseRecord } from '../../../src/dispatch/record.js';
import {
  IdempotencyConflictError,
  InvalidFollowUpError,
  type SendResult,
} from '../../../src/producer/index.js';
import { keysFor } from '../../../src/redis/keys.js';
import { badFields, topFields, utf8Bytes } from './oracle.js';

/** How an entry point answered one input. */
export type Answer =
  | { kind: 'accepted'; dispatchId: string; deduplicated: boolean }
  | { kind: 'rejected'; fields: string[]; message: string }
  /** Its idempotency key holds `dispatchId`, a different follow-up: not enqueued. */
  | { kind: 'conflict'; dispatchId: string }
  | { kind: 'error'; message: string };

/** How an entry point answered a batch. */
export type BatchAnswer =
  | { kind: 'accepted'; results: readonly { dispatchId: string; deduplicated: boolean }[] }
  /** Enqueued but for key conflicts: one answer per input. */
  | { kind: 'partial'; answers: readonly Answer[] }
  | {
      kind: 'rejected';
      problems: readonly { index?: number; field: string; message: string }[];
    }
  | { kind: 'error'; message: string };

function errorOf(answer: BatchAnswer): Answer {
  return {
    kind: 'error',
    message: answer.kind === 'error' ? answer.message : 'no result for this input',
  };
}

/** One answer that breaks the rules, with the input that got it. */
export interface Violation {
  readonly rule: string;
  readonly input: unknown;
  readonly detail: string;
}

/**
 * The books of a fuzzing run: every answer checked against the oracle, then Redis checked against
 * what was accepted: exactly one dispatch record and one BullMQ job per accepted dispatch, each
 * record holding what was sent, and nothing else.
 */
export class FuzzBooks {
  tried = 0;
  valid = 0;
  invalid = 0;
  /** Valid inputs refused, rightly, because their key holds a different follow-up. */
  conflicts = 0;
  readonly violations: Violation[] = [];
  /** The first input accepted for each dispatch id (a repeated key returns the first). */
  readonly firsts = new Map<string, Record<string, unknown>>();

  constructor(private readonly promptMaxBytes: number) {}

  /** Checks one input's answer. */
  check(input: unknown, answer: Answer): void {
    this.tried++;
    const expected = badFields(input, this.promptMaxBytes);
    if (expected.length === 0) this.valid++;
    else this.invalid++;
    const flag = (rule: string, detail: string): void => {
      this.violations.push({ rule, input, detail });
    };
    if (answer.kind === 'error') return flag('answered with an unexpected error', answer.message);
    if (answer.kind === 'conflict') {
      if (expected.length > 0)
        return flag('invalid input answered as a conflict', expected.join(', '));
      const first = this.firsts.get(answer.dispatchId);
      if (!first || sameContent(first, input))
        flag('key conflict without a different first follow-up', answer.dispatchId);
      else this.conflicts++;
      return;
    }
    if (answer.kind === 'accepted') {
      if (expected.length > 0) return flag('invalid input accepted', expected.join(', '));
      const first = this.firsts.get(answer.dispatchId);
      if (!answer.deduplicated && !first)
        this.firsts.set(answer.dispatchId, input as Record<string, unknown>);
      else if (answer.deduplicated && first && !sameContent(first, input))
        flag('different content deduplicated: the new prompt was dropped', answer.dispatchId);
      return;
    }
    if (expected.length === 0) return flag('valid input refused', answer.message);
    const prompt = (input as { prompt?: unknown } | null | undefined)?.prompt;
    if (
      typeof prompt === 'string' &&
      prompt.isWellFormed() &&
      utf8Bytes(prompt) > this.promptMaxBytes &&
      !answer.message.includes(`${this.promptMaxBytes} bytes`)
    )
      flag('oversized prompt refused without saying the limit', answer.message);
    const named = new Set(answer.fields.flatMap(topFields));
    if (named.size !== new Set(expected).size || !expected.every((f) => named.has(f)))
      flag(
        'error names other fields',
        `expected ${expected.join(', ')}; got ${[...named].join(', ')}`,
      );
    for (const field of expected)
      if (!answer.message.includes(field)) flag('message does not name the field', answer.message);
  }

  /**
   * Checks a batch's answer: all accepted, or the batch refused with problems naming the index and
   * field of each invalid input and nothing else (all or nothing).
   */
  checkBatch(inputs: readonly unknown[], answer: BatchAnswer): void {
    if (answer.kind === 'partial') {
      inputs.forEach((input, i) => this.check(input, answer.answers[i] ?? errorOf(answer)));
      return;
    }
    if (answer.kind !== 'rejected') {
      inputs.forEach((input, i) => {
        const result = answer.kind === 'accepted' ? answer.results[i] : undefined;
        this.check(input, result ? { kind: 'accepted', ...result } : errorOf(answer));
      });
      return;
    }
    const anyInvalid = inputs.some((input) => badFields(input, this.promptMaxBytes).length > 0);
    inputs.forEach((input, i) => {
      const problems = answer.problems.filter((p) => (p.index ?? 0) === i);
      if (problems.length > 0) {
        const message = problems.map((p) => `${p.field}: ${p.message}`).join('; ');
        this.check(input, { kind: 'rejected', fields: problems.map((p) => p.field), message });
        return;
      }
      this.tried++;
      const bad = badFields(input, this.promptMaxBytes);
      if (bad.length === 0) this.valid++;
      else this.invalid++;
      if (bad.length > 0)
        this.violations.push({ rule: 'invalid input not reported', input, detail: bad.join(', ') });
      else if (!anyInvalid)
        this.violations.push({
          rule: 'valid input refused',
          input,
          detail: 'a valid batch refused',
        });
    });
  }

  /** The invalid inputs that reached Redis, and the records that differ from what was sent. */
  async audit(redis: Redis, prefix: string, bullJobs: number): Promise<void> {
    const records = await scanCount(redis, `${prefix}:d:*`);
    if (records !== this.firsts.size)
      this.violations.push({
        rule: 'dispatch records other than the accepted ones',
        input: null,
        detail: `${records} records for ${this.firsts.size} accepted dispatches`,
      });
    if (bullJobs !== this.firsts.size)
      this.violations.push({
        rule: 'BullMQ jobs other than the accepted ones',
        input: null,
        detail: `${bullJobs} jobs for ${this.firsts.size} accepted dispatches`,
      });
    const keys = keysFor(prefix);
    const ids = [...this.firsts.keys()];
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hgetall(keys.dispatch(id)).get(keys.prompt(id));
    const replies = (await pipeline.exec()) ?? [];
    ids.forEach((id, i) => {
      const hash = (replies[2 * i]?.[1] ?? {}) as Record<string, string>;
      const prompt = replies[2 * i + 1]?.[1];
      // The prompt has its own key; the record as the store reads it (see `Sends.get`).
      const record = parseRecord(id, typeof prompt === 'string' ? { ...hash, prompt } : hash);
      const sent = this.firsts.get(id) ?? {};
      const same =
        record !== undefined &&
        record.projectId === sent['projectId'] &&
        record.jobId === sent['jobId'] &&
        record.prompt === sent['prompt'] &&
        // null means absent (contract, section 4).
        record.key === (sent['key'] ?? undefined) &&
        JSON.stringify(record.meta) === JSON.stringify(sent['meta'] ?? undefined);
      if (!same)
        this.violations.push({
          rule: 'stored record differs from the accepted input',
          input: sent,
          detail: safeJson(record && { ...record, state: undefined }),
        });
    });
  }

  /** Invalid inputs that were enqueued (the "duplicated" figure of bad input). */
  get enqueuedInvalid(): number {
    return this.violations.filter((v) => v.rule === 'invalid input accepted').length;
  }

  /** Valid inputs refused (the "lost" figure of bad input). */
  get refusedValid(): number {
    return this.violations.filter((v) => v.rule === 'valid input refused').length;
  }

  /** The first few violations, readable. */
  sample(n = 5): string[] {
    return this.violations
      .slice(0, n)
      .map((v) => `${v.rule}: ${v.detail} for ${safeJson(v.input).slice(0, 300)}`);
  }
}

async function scanCount(redis: Redis, pattern: string): Promise<number> {
  let cursor = '0';
  let count = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    count += keys.length;
  } while (cursor !== '0');
  return count;
}

/** Same project, job, prompt and meta (keys in any order): what a repeated key may carry. */
function sameContent(a: Record<string, unknown>, b: unknown): boolean {
  const c = b as Record<string, unknown>;
  return (
    a['projectId'] === c['projectId'] &&
    a['jobId'] === c['jobId'] &&
    a['prompt'] === c['prompt'] &&
    sortedJson(a['meta'] ?? undefined) === sortedJson(c['meta'] ?? undefined)
  );
}

function sortedJson(value: unknown): string {
  return (
    JSON.stringify(value, (_key, v: unknown) =>
      typeof v === 'object' && v !== null && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
        : v,
    ) ?? 'undefined'
  );
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The answer of one `send`. */
export async function answerOf(
  call: () => Promise<{ dispatchId: string; deduplicated: boolean }>,
): Promise<Answer> {
  try {
    return { kind: 'accepted', ...(await call()) };
  } catch (err) {
    if (err instanceof InvalidFollowUpError)
      return { kind: 'rejected', fields: err.problems.map((p) => p.field), message: err.message };
    if (err instanceof IdempotencyConflictError && err.conflicts[0])
      return { kind: 'conflict', dispatchId: err.conflicts[0].dispatchId };
    return { kind: 'error', message: err instanceof Error ? err.message : String(err) };
  }
}

/** One answer per input from a batch's results, `null` where `conflictOf` names the holder. */
export function partialAnswer(
  results: readonly (SendResult | null)[],
  conflictOf: (index: number) => string | undefined,
): BatchAnswer {
  return {
    kind: 'partial',
    answers: results.map((result, i): Answer => {
      if (result) return { kind: 'accepted', ...result };
      const dispatchId = conflictOf(i);
      return dispatchId
        ? { kind: 'conflict', dispatchId }
        : { kind: 'error', message: `no result and no conflict for item ${i}` };
    }),
  };
}

/** The answer of one `sendMany`. */
export async function batchAnswerOf(
  call: () => Promise<readonly { dispatchId: string; deduplicated: boolean }[]>,
): Promise<BatchAnswer> {
  try {
    return { kind: 'accepted', results: await call() };
  } catch (err) {
    if (err instanceof InvalidFollowUpError) return { kind: 'rejected', problems: err.problems };
    if (err instanceof IdempotencyConflictError)
      return partialAnswer(
        err.results,
        (i) => err.conflicts.find((c) => c.index === i)?.dispatchId,
      );
    return { kind: 'error', message: err instanceof Error ? err.message : String(err) };
  }
}
