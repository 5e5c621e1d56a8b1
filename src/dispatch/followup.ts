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
import { bothDeadlinesProblem, DEADLINE_FIELDS, deadlineOf, type Deadline } from './deadline.js';
import {
  isAboutMeta,
  issueProblems,
  metaBytes,
  metaShapeProblem,
  suspectField,
  type FieldProblem,
} from './followup-problems.js';

/** Largest `meta` accepted, as UTF-8 bytes of its JSON. It rides along in every event. */
export const META_MAX_BYTES = 4096;
/**
 * Deepest `meta` accepted, in levels of objects and arrays (`{}` is 1). Checked before the schema:
 * zod validates JSON recursively, and a few KB of `[` would overflow the stack.
 */
export const META_MAX_DEPTH = 32;
/** Largest project id, job id and idempotency key accepted. */
export const ID_MAX_CHARS = 200;

/** What a producer hands us. */
export interface FollowUpInput {
  projectId: string;
  jobId: string;
  prompt: string;
  /** Idempotency key: a second send with the same key returns the first dispatch. `null`: none. */
  key?: string | null;
  /** Small JSON object echoed in the completion event. `null`: none. */
  meta?: Record<string, unknown> | null;
  /** Its deadline, a duration (`30m`) or an ISO 8601 date-time, not both; see `deadline.ts`. */
  ttl?: string | null;
  expiresAt?: string | null;
}

/** A validated follow-up; its deadline fields only when given. */
export interface FollowUp extends Deadline {
  readonly projectId: string;
  readonly jobId: string;
  readonly prompt: string;
  readonly key: string | undefined;
  readonly meta: Record<string, unknown> | undefined;
}

// Control characters would corrupt logs and paths; ids travel in URLs and Redis keys.
const CONTROL = /\p{Cc}/u;
const utf8Bytes = (text: string) => Buffer.byteLength(text, 'utf8');

/** A project id, job id or idempotency key (the job payload's ids are checked with it too). */
export const identifier = z
  .string({ error: 'must be a string' })
  .min(1, { error: 'must not be empty' })
  .max(ID_MAX_CHARS, { error: `must be at most ${ID_MAX_CHARS} characters` })
  // Redis stores UTF-8: a lone surrogate would come back as U+FFFD, so two keys could name one
  // dispatch and a stored id would differ from the one sent (and break encodeURIComponent).
  .refine((s) => s.isWellFormed(), { error: 'must be valid Unicode' })
  .refine((s) => !CONTROL.test(s), { error: 'must not contain control characters' })
  .refine((s) => s.trim().length > 0, { error: 'must not be blank' });

// Its size is checked on the caller's object, not on zod's copy (see copyOfMeta).
const meta = z.record(z.string(), z.json(), { error: 'must be a JSON object' });

/** The schema of one follow-up; `promptMaxBytes` comes from `PROMPT_MAX_BYTES`. */
export function followUpSchema(promptMaxBytes: number) {
  // Built once per limit: building a schema costs far more than using it, and sends are many.
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
      projectId: identifier.describe("the agent job's project"),
      jobId: identifier.describe('the agent job the prompt goes to'),
      prompt: z
        .string({ error: 'must be a string' })
        .min(1, { error: 'must not be empty' })
        .refine((s) => s.isWellFormed(), { error: 'must be valid Unicode' })
        .refine((s) => utf8Bytes(s) <= promptMaxBytes, {
          error: `must be at most ${promptMaxBytes} bytes`,
        })
        .describe('the follow-up prompt, at most PROMPT_MAX_BYTES bytes of UTF-8'),
      // null means absent (withoutNulls drops it first); the schema says so for the documentation.
      key: identifier.nullish().describe('idempotency key: the same key is accepted once'),
      meta: meta.nullish().describe('a small JSON object echoed in the event'),
      ...DEADLINE_FIELDS,
    },
    { error: 'must be an object with projectId, jobId and prompt' },
  );
}

/**
 * Validates one follow-up; the problems name their fields (`prompt`, `meta.x`...). Never throws:
 * an error raised while validating (a getter of an in-process caller's object, say) is a problem
 * of the input too. `meta` is checked for depth and size before the schema walks it.
 */
export function checkFollowUp(
  input: unknown,
  promptMaxBytes: number,
  index?: number,
): { ok: true; value: FollowUp } | { ok: false; problems: FieldProblem[] } {
  const problem = (field: string, message: string): FieldProblem => ({
    field,
    message,
    ...(index === undefined ? {} : { index }),
  });
  try {
    input = withoutNulls(input);
    const plain = plainFollowUp(input, promptMaxBytes);
    if (plain) return { ok: true, value: plain };
    // A meta too deep or too big is not handed to the schema; the other fields still are.
    const shape = metaShapeProblem(input, META_MAX_BYTES, META_MAX_DEPTH);
    const result = followUpSchema(promptMaxBytes).safeParse(
      shape ? { ...(input as object), meta: undefined } : input,
    );
    const problems = result.success
      ? []
      : issueProblems(result.error.issues, input).map((p) => problem(p.field, p.message));
    const both = bothDeadlinesProblem(input);
    if (both) problems.push(problem('expiresAt', both));
    if (shape) problems.push(problem('meta', shape));
    else if (!problems.some(isAboutMeta) && metaBytes(input) > META_MAX_BYTES)
      problems.push(problem('meta', `must be at most ${META_MAX_BYTES} bytes as JSON`));
    if (!result.success || problems.length > 0) return { ok: false, problems };
    const { projectId, jobId, prompt } = result.data;
    const key = result.data.key ?? undefined;
    const value = { projectId, jobId, prompt, key, meta: copyOfMeta(input) };
    return { ok: true, value: { ...value, ...deadlineOf(result.data) } };
  } catch {
    // Nothing else can be said about a value whose validation threw; the field is unknown.
    return { ok: false, problems: [problem(suspectField(input), 'could not be read as JSON')] };
  }
}

const FIELDS: ReadonlySet<string> = new Set(['projectId', 'jobId', 'prompt', 'key', 'meta']);

/**
 * The follow-up that `input` is when it is a plain object of valid fields without `meta`, the
 * common case, checked without the schema (whose walk costs more than the rest of a send);
 * `undefined` for anything else, which the schema then checks and words the problems of. It
 * accepts only what the schema accepts, and answers what the schema answers (fields read the same
 * way, `for...in` included: test/dispatch/followup.test.ts compares the two).
 */
function plainFollowUp(input: unknown, promptMaxBytes: number): FollowUp | undefined {
  if (typeof input !== 'object' || input === null) return undefined;
  const prototype: unknown = Object.getPrototypeOf(input);
  if (prototype !== Object.prototype && prototype !== null) return undefined;
  for (const field in input) if (!FIELDS.has(field)) return undefined;
  const { projectId, jobId, prompt, key, meta } = input as Partial<Record<string, unknown>>;
  if (!isIdentifier(projectId) || !isIdentifier(jobId) || meta !== undefined) return undefined;
  if (key !== undefined && !isIdentifier(key)) return undefined;
  if (typeof prompt !== 'string' || prompt.length === 0 || !prompt.isWellFormed()) return undefined;
  if (utf8Bytes(prompt) > promptMaxBytes) return undefined;
  return { projectId, jobId, prompt, key, meta: undefined };
}

/** What {@link identifier} accepts. */
function isIdentifier(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length > 0 &&
    value.length <= ID_MAX_CHARS &&
    value.isWellFormed() &&
    !CONTROL.test(value) &&
    value.trim().length > 0
  );
}

/**
 * A copy of the caller's `meta`, exactly as sent. zod rebuilds objects key by key, and assigning
 * a key named `__proto__` sets a prototype instead of a property: the key would vanish. JSON.parse
 * keeps it as an own property, so a JSON round trip of the original keeps every key (and detaches
 * the copy from later changes by the caller).
 */
function copyOfMeta(input: unknown): Record<string, unknown> | undefined {
  const meta = (input as { meta?: unknown }).meta;
  if (meta === undefined) return undefined;
  return JSON.parse(JSON.stringify(meta)) as Record<string, unknown>;
}

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
