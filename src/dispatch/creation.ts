/**
 * Creations of agent jobs, and follow-ups chained to them. A creation is a dispatch like a
 * follow-up (`kind: 'create'` on its record): budgeted, sent once, tracked until its new job's
 * first run ends, one event (`job.*`). It has no agent job before its POST answers, so its lane
 * is named after its own dispatch id ({@link createdLane}); a follow-up sent `after` it joins
 * that lane, behind it, and goes to the new job once the creation ended (see docs/creations.md).
 */
import { checkFollowUp, identifier, type FollowUp, type FollowUpInput } from './followup.js';
import type { FieldProblem } from './followup-problems.js';

export type { FollowUpInput };

/** What `producer.create` takes: a follow-up's fields but `jobId`. */
export type CreateInput = Omit<FollowUpInput, 'jobId'>;

/**
 * What `send` and `sendMany` take: a follow-up, a creation (`create: true`), or a follow-up
 * chained to a creation (`after`: the creation's dispatch id or idempotency key).
 */
export type DispatchInput =
  FollowUpInput | (CreateInput & { create: true }) | (CreateInput & { after: string });

/** What a creation or a chained follow-up adds to a follow-up on its way to REGISTER. */
export interface DispatchKind {
  /** `create`: POST a new agent job with the prompt. */
  readonly kind?: 'create' | undefined;
  /** A chained follow-up: the dispatch id of the creation it waits for (resolved, not a key). */
  readonly after?: string | undefined;
  /** The dispatch id, fixed before REGISTER (a creation's lane is named after it). */
  readonly dispatchId?: string | undefined;
}

/** A follow-up, a creation or a chained follow-up, checked. */
export type Dispatchable = FollowUp & DispatchKind;

/** A checked input before its `after` (a dispatch id or a key) names a creation's lane. */
export type Unresolved = Dispatchable & { readonly afterRef?: string };

/** The lane of a creation, and of the follow-ups chained to it. */
export function createdLane(dispatchId: string): string {
  return `created:${dispatchId}`;
}

/** `checked`, refused when its jobId is a creation's lane: it would join that lane. */
function notALane<T extends { ok: true; value: { jobId: string } } | { ok: false }>(
  checked: T,
  index: number | undefined,
): T | { ok: false; problems: FieldProblem[] } {
  if (!checked.ok || !checked.value.jobId.startsWith(createdLane(''))) return checked;
  const message = 'must not start with "created:" (a creation\'s lane: chain with after instead)';
  return {
    ok: false,
    problems: [{ field: 'jobId', message, ...(index === undefined ? {} : { index }) }],
  };
}

/** Whether the dispatch `ref` names is a creation: its lane is named after itself. */
export function isCreation(ref: { readonly dispatchId: string; readonly jobId: string }): boolean {
  return ref.jobId === createdLane(ref.dispatchId);
}

/**
 * The agent job a dispatch goes to (or went to): its `target` once known, else its lane's job;
 * `''` for a creation not answered yet, or a chained follow-up not sent yet.
 */
export function agentJobOf(record: {
  readonly jobId: string;
  readonly kind?: 'create' | undefined;
  readonly after?: string | undefined;
  readonly target?: string | undefined;
}): string {
  if (record.target) return record.target;
  return record.kind === 'create' || record.after ? '' : record.jobId;
}

/** Stands for the job id while a creation or chained follow-up is checked as a follow-up. */
const PENDING_JOB = '-';

/**
 * Checks one input: a follow-up (`jobId`), a creation (`"create": true`, no `jobId`) or a
 * chained follow-up (`after`, no `jobId`). The last two are checked as a follow-up would be,
 * their job id the lane's, set later (the producer's `resolveChains`).
 */
export function checkDispatch(
  input: unknown,
  promptMaxBytes: number,
  index?: number,
): { ok: true; value: Unresolved } | { ok: false; problems: FieldProblem[] } {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    return checkFollowUp(input, promptMaxBytes, index);
  const { create, after, ...rest } = input as Record<string, unknown>;
  const given = (v: unknown) => v !== undefined && v !== null;
  if (!given(create) && !given(after))
    return notALane(checkFollowUp(input, promptMaxBytes, index), index);
  const problems: FieldProblem[] = [];
  const problem = (field: string, message: string) =>
    problems.push({ field, message, ...(index === undefined ? {} : { index }) });
  if (given(create) && create !== true) problem('create', 'must be true when given');
  if (given(create) && given(after)) problem('after', 'a creation cannot be chained');
  if (given(rest['jobId']))
    problem('jobId', given(create) ? 'a creation has no jobId' : 'give jobId or after, not both');
  const afterRef = given(after) ? identifier.safeParse(after) : undefined;
  if (afterRef && !afterRef.success)
    problem('after', afterRef.error.issues[0]?.message ?? 'must be a dispatch id or key');
  const checked = checkFollowUp({ ...rest, jobId: PENDING_JOB }, promptMaxBytes, index);
  if (!checked.ok) problems.push(...checked.problems);
  if (!checked.ok || problems.length > 0) return { ok: false, problems };
  if (afterRef?.success) return { ok: true, value: { ...checked.value, afterRef: afterRef.data } };
  return { ok: true, value: { ...checked.value, kind: 'create' } };
}
