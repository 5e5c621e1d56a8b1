import type { z } from 'zod';

/**
 * A follow-up as JSON clients write it: `null` for an optional field means absent, and the
 * schema's issues are worded for a person: an unknown field first, named (`unknown field
 * projectid (did you mean projectId?)`), and then not also "projectId: must be a string" for the
 * field it was probably meant as, which would send the reader the wrong way.
 */

/** The optional fields, where `null` means absent (JSON clients send it for "no value"). */
const OPTIONAL = ['key', 'meta', 'ttl', 'expiresAt'] as const;

/** `input` without its `null` optional fields (a copy; the caller's object is left alone). */
export function withoutNulls(input: unknown): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const record = input as Record<string, unknown>;
  if (!OPTIONAL.some((field) => record[field] === null)) return input;
  const copy: Record<string, unknown> = { ...record };
  for (const field of OPTIONAL) if (copy[field] === null) delete copy[field];
  return copy;
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
