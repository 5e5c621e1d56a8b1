/**
 * The job contract of agent-dispatch.
 *
 * Glossary
 * - **follow-up**: one prompt for one agent job, handed to us by a producer.
 * - **dispatch**: our record of one follow-up from enqueue to its terminal event; `dispatchId`
 *   names it. A follow-up becomes a dispatch the moment `send` accepts it.
 * - **agent job**: the vendor's job (`projectId`, `jobId`) that the prompt is sent to.
 * - **lane**: the ordered list of dispatches of one agent job. Only its head is ever in flight; the
 *   next is released when the head's run reaches a terminal status (promise 2).
 * - **budget**: a project's sends in the sliding window of `SEND_RATE_LIMIT`, fleet-wide.
 * - **poll tick**: one run of the poller's job scheduler; it reads the status of due dispatches.
 * - **terminal status**: `completed`, `archived` or `failed`; the dispatch then ends with one event.
 */
import { z } from 'zod';

/** Largest `meta` accepted, as UTF-8 bytes of its JSON. It rides along in every event. */
export const META_MAX_BYTES = 4096;
/** Largest project id, job id and idempotency key accepted. */
export const ID_MAX_CHARS = 200;

/** What a producer hands us. */
export interface FollowUpInput {
  projectId: string;
  jobId: string;
  prompt: string;
  /** Idempotency key: a second send with the same key returns the first dispatch. */
  key?: string;
  /** Small JSON object echoed in the completion event. */
  meta?: Record<string, unknown>;
}

/** A validated follow-up. */
export interface FollowUp {
  readonly projectId: string;
  readonly jobId: string;
  readonly prompt: string;
  readonly key: string | undefined;
  readonly meta: Record<string, unknown> | undefined;
}

// Control characters would corrupt logs and paths; ids travel in URLs and Redis keys.
const CONTROL = /\p{Cc}/u;
const utf8Bytes = (text: string) => Buffer.byteLength(text, 'utf8');

const identifier = z
  .string({ error: 'must be a string' })
  .min(1, { error: 'must not be empty' })
  .max(ID_MAX_CHARS, { error: `must be at most ${ID_MAX_CHARS} characters` })
  // Redis stores UTF-8: a lone surrogate would come back as U+FFFD, so two keys could name one
  // dispatch and a stored id would differ from the one sent (and break encodeURIComponent).
  .refine((s) => s.isWellFormed(), { error: 'must be valid Unicode' })
  .refine((s) => !CONTROL.test(s), { error: 'must not contain control characters' })
  .refine((s) => s.trim().length > 0, { error: 'must not be blank' });

const meta = z
  .record(z.string(), z.json(), { error: 'must be a JSON object' })
  .refine((value) => utf8Bytes(JSON.stringify(value)) <= META_MAX_BYTES, {
    error: `must be at most ${META_MAX_BYTES} bytes as JSON`,
  });

/** The schema of one follow-up; `promptMaxBytes` comes from `PROMPT_MAX_BYTES`. */
export function followUpSchema(promptMaxBytes: number) {
  // Built once per limit: building it per call was a fifth of the producer's CPU (BENCHMARKS.md).
  let schema = schemas.get(promptMaxBytes);
  if (!schema) {
    schema = buildSchema(promptMaxBytes);
    schemas.set(promptMaxBytes, schema);
  }
  return schema;
}

const schemas = new Map<number, ReturnType<typeof buildSchema>>();

function buildSchema(promptMaxBytes: number) {
  return z.strictObject(
    {
      projectId: identifier,
      jobId: identifier,
      prompt: z
        .string({ error: 'must be a string' })
        .min(1, { error: 'must not be empty' })
        .refine((s) => s.isWellFormed(), { error: 'must be valid Unicode' })
        .refine((s) => utf8Bytes(s) <= promptMaxBytes, {
          error: `must be at most ${promptMaxBytes} bytes`,
        }),
      key: identifier.optional(),
      meta: meta.optional(),
    },
    { error: 'must be an object with projectId, jobId and prompt' },
  );
}

/** One problem with one field of one follow-up. `index` is set for batches. */
export interface FieldProblem {
  readonly field: string;
  readonly message: string;
  readonly index?: number;
}

/** Thrown for invalid input; nothing of the call was enqueued. Code `invalid_followup`. */
export class InvalidFollowUpError extends Error {
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

/** Validates one follow-up; the problems name their fields (`prompt`, `meta.x`...). */
export function checkFollowUp(
  input: unknown,
  promptMaxBytes: number,
  index?: number,
): { ok: true; value: FollowUp } | { ok: false; problems: FieldProblem[] } {
  const result = followUpSchema(promptMaxBytes).safeParse(input);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => ({
      field: fieldName(issue),
      message: issue.message,
      ...(index === undefined ? {} : { index }),
    }));
    return { ok: false, problems };
  }
  const { projectId, jobId, prompt, key, meta: m } = result.data;
  return { ok: true, value: { projectId, jobId, prompt, key, meta: m } };
}

function fieldName(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return issue.keys.join(', ');
  return issue.path.length > 0 ? issue.path.map(String).join('.') : '(body)';
}
