import type { z } from 'zod';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * What is wrong with a follow-up that was refused, worded for a person, and the error that carries
 * it. The schema's issues become problems that name their fields: an unknown field first, named
 * (`unknown field projectid (did you mean projectId?)`), and then not also "projectId: must be a
 * string" for the field it was probably meant as, which would send the reader the wrong way.
 * `meta` is measured here too, before and after the schema: a valid follow-up without `meta`
 * (the common case) needs nothing of this file.
 */

/** One problem with one field of one follow-up. `index` is set for batches. */
export interface FieldProblem {
  readonly field: string;
  readonly message: string;
  readonly index?: number;
}

/** Thrown for invalid input; nothing of the call was enqueued. Code `invalid_followup`. */
export class InvalidFollowUpError extends AgentDispatchError {
  readonly code = 'invalid_followup';
  /** The first bad field, for callers that want one name. */
  readonly field: string;
  constructor(readonly problems: readonly FieldProblem[]) {
    super(problems.map(describeProblem).join('; '));
    this.name = 'InvalidFollowUpError';
    this.field = problems[0]?.field ?? '';
  }
}

function describeProblem(p: FieldProblem): string {
  return `${p.index === undefined ? '' : `[${p.index}] `}${p.field}: ${p.message}`;
}

/**
 * Why `meta` is too deep or too big to validate, found by an iterative walk (no recursion, so no
 * input can overflow the stack), or `undefined`. Each JSON value takes at least one byte, so more
 * values than `maxBytes` cannot fit; a cycle is reported as too deep.
 */
export function metaShapeProblem(
  input: unknown,
  maxBytes: number,
  maxDepth: number,
): string | undefined {
  if (typeof input !== 'object' || input === null || !('meta' in input)) return undefined;
  const pending: [unknown, number][] = [[input.meta, 1]];
  let values = 0;
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [value, depth] = next;
    if (++values > maxBytes) return `must be at most ${maxBytes} bytes as JSON`;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > maxDepth) return `must be nested at most ${maxDepth} levels deep`;
    for (const child of Object.values(value)) pending.push([child, depth + 1]);
  }
  return undefined;
}

export function isAboutMeta(p: FieldProblem): boolean {
  return p.field === 'meta' || p.field.startsWith('meta.');
}

/** UTF-8 bytes of the caller's `meta` as JSON (0 when absent); called once it validated. */
export function metaBytes(input: unknown): number {
  const meta = (input as { meta?: unknown }).meta;
  return meta === undefined ? 0 : Buffer.byteLength(JSON.stringify(meta), 'utf8');
}

/** The field to blame when validation threw: `meta` is the only one that is walked into. */
export function suspectField(input: unknown): string {
  return typeof input === 'object' && input !== null && 'meta' in input ? 'meta' : '(body)';
}

/** The fields of a follow-up, for the "did you mean" hint. */
const KNOWN = ['projectId', 'jobId', 'prompt', 'key', 'meta', 'ttl', 'expiresAt'] as const;

/** One problem, before the batch index is added. */
export interface IssueProblem {
  readonly field: string;
  readonly message: string;
}

/** The problems of `issues` (from the follow-up schema) about `input`, unknown fields first. */
export function issueProblems(issues: readonly z.core.$ZodIssue[], input: unknown): IssueProblem[] {
  const unknown = issues.flatMap((issue) => (issue.code === 'unrecognized_keys' ? issue.keys : []));
  const present = (field: string) => typeof input === 'object' && input !== null && field in input;
  const meant = new Set<string>();
  const first = unknown.map((field) => {
    const guess = KNOWN.find((known) => !present(known) && similar(field, known));
    if (guess) meant.add(guess);
    // No "; " inside a message: `enqueue --file` joins a line's problems with it.
    const hint = guess ? ` (did you mean ${guess}?)` : ` (the fields are ${KNOWN.join(', ')})`;
    return { field, message: `unknown field ${field}${hint}` };
  });
  const rest = issues
    .filter((issue) => issue.code !== 'unrecognized_keys')
    // The missing field that an unknown one stands for is already explained by it.
    .filter((issue) => !(issue.path.length === 1 && meant.has(String(issue.path[0]))))
    .map((issue) => ({ field: fieldName(issue), message: issue.message }));
  return [...first, ...rest];
}

function fieldName(issue: z.core.$ZodIssue): string {
  return issue.path.length > 0 ? issue.path.map(String).join('.') : '(body)';
}

/** The same letters in another case, or at most two edits apart (`projectid`, `jobid`, `promt`). */
function similar(a: string, b: string): boolean {
  const x = a.toLowerCase().replace(/[_-]/g, '');
  const y = b.toLowerCase();
  if (x === y) return true;
  if (Math.abs(x.length - y.length) > 2) return false;
  return editDistance(x, y) <= 2;
}

/** Levenshtein distance of two short strings. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + cost,
      );
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}
