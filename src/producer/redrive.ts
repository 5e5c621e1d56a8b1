import { hash } from 'node:crypto';
import { EVENT_TYPES } from '../dispatch/event.js';
import type { DeadLetter, DispatchStore } from '../store/store.js';
import { IdempotencyConflictError } from './errors.js';
import type { Producer } from './api.js';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * A redrive (`admin.redrive`): a follow-up that ended undeliverable or timed out is sent again as
 * a NEW follow-up of the same project, agent job, prompt and meta. The old one keeps its one
 * event and is never sent again; the new one has its own dispatch id, its own event, and the
 * idempotency key `redrive:<old dispatch id>`, so redriving the same dead letter twice (even at
 * once, from two operators) gives one new follow-up. The records link the two: `redrivenTo` in the
 * old, `redriveOf` in the new. The prompt comes from the dead letter, which keeps it for
 * `DEAD_LETTER_RETENTION` after its end; the redrive deletes it there (the new one has it).
 */

/** The event types a redrive takes. */
export const REDRIVABLE: ReadonlySet<string> = new Set([
  EVENT_TYPES.undeliverable,
  EVENT_TYPES.timedOut,
]);

/** Why a follow-up cannot be redriven. */
export type NotRedrivableWhy =
  'unknown' | 'not_ended' | 'not_dead_letter' | 'prompt_gone' | 'job_not_created';

/**
 * The follow-up cannot be redriven; nothing changed. Code `not_redrivable`, `why` says which rule
 * (an unknown id, one not ended yet, one that ended otherwise than undeliverable or timed out, one
 * whose prompt is no longer kept, one chained to a creation that made it no job to go to).
 */
export class NotRedrivableError extends AgentDispatchError {
  readonly code = 'not_redrivable';
  constructor(
    readonly dispatchId: string,
    readonly why: NotRedrivableWhy,
    detail: string,
  ) {
    super(`follow-up ${dispatchId} cannot be redriven: ${detail}`);
    this.name = 'NotRedrivableError';
  }
}

/** What a redrive of one follow-up did. */
export interface RedriveResult {
  /** The dead letter. */
  readonly dispatchId: string;
  /** The follow-up that redrives it. */
  readonly redrivenTo: string;
  /** False when an earlier redrive made it (nothing was sent now). */
  readonly created: boolean;
}

/** The idempotency key of the redrive of `dispatchId` (hashed when the id is too long for one). */
export function redriveKey(dispatchId: string): string {
  const key = `redrive:${dispatchId}`;
  return key.length <= 200 ? key : `redrive:#${hash('sha256', dispatchId)}`;
}

/** A shard's store as the redrive uses it. */
export interface RedriveShard {
  readonly store: DispatchStore;
}

/** What a dry run answers for a dead letter a redrive would send again. */
export type PlannedRedrive = DeadLetter & { readonly dryRun: true };

/** What a redrive answers for one follow-up. */
export type RedriveOutcome = RedriveResult | NotRedrivableError | PlannedRedrive;

/**
 * Redrives `ids` (each a dead letter of one of `shards`) with `producer`: in one batch, in the
 * order they were first enqueued, so each agent job gets them in its original order. Answers in
 * the order of `ids`: a result, or the {@link NotRedrivableError} of that one; with `dryRun`, what
 * would be sent instead of a new result.
 */
export async function redriveMany(
  shards: readonly RedriveShard[],
  producer: Pick<Producer, 'sendMany'>,
  ids: readonly string[],
  dryRun = false,
): Promise<RedriveOutcome[]> {
  const found = await Promise.all(ids.map((id) => findDeadLetter(shards, id)));
  return dryRun ? found.map(planned) : redriveFound(producer, found);
}

/** What a dry run answers for `f`: what a redrive would answer, or the dead letter it would send. */
export function planned(f: Candidate | NotRedrivableError): RedriveOutcome {
  if (f instanceof NotRedrivableError || f.redrivenTo !== undefined) return answerOf(f);
  const { dispatchId, projectId, jobId, type, reason, finishedAt } = f;
  return {
    dispatchId,
    projectId,
    jobId,
    type,
    reason,
    finishedAt,
    redrivenTo: undefined,
    dryRun: true,
  };
}

function answerOf(f: Candidate | NotRedrivableError): RedriveResult | NotRedrivableError {
  return f instanceof NotRedrivableError
    ? f
    : { dispatchId: f.dispatchId, redrivenTo: f.redrivenTo ?? '', created: false };
}

/** Redrives the dead letters `found` (in one batch, in enqueue order); answers in their order. */
export async function redriveFound(
  producer: Pick<Producer, 'sendMany'>,
  found: readonly (Candidate | NotRedrivableError)[],
): Promise<RedriveOutcome[]> {
  const todo = found
    .map((f, index) => ({ f, index }))
    .filter(
      (x): x is { f: Candidate; index: number } =>
        !(x.f instanceof NotRedrivableError) && x.f.redrivenTo === undefined,
    )
    .sort((a, b) => a.f.enqueuedAt - b.f.enqueuedAt);
  const answers: RedriveOutcome[] = found.map(answerOf);
  if (todo.length === 0) return answers;
  const sent = await producer
    .sendMany(
      todo.map(({ f }) => ({
        projectId: f.projectId,
        jobId: f.jobId,
        prompt: f.prompt,
        key: redriveKey(f.dispatchId),
        ...(f.meta ? { meta: f.meta } : {}),
      })),
    )
    .catch((err: unknown) => {
      // A key of this form used by a caller for a follow-up of their own: that one is refused.
      if (err instanceof IdempotencyConflictError) return err.results;
      throw err;
    });
  await Promise.all(
    todo.map(async ({ f, index }, i) => {
      const result = sent[i];
      if (!result) {
        answers[index] = new NotRedrivableError(
          f.dispatchId,
          'not_dead_letter',
          `its redrive key ${redriveKey(f.dispatchId)} is taken by another follow-up`,
        );
        return;
      }
      await f.store.followups.linkRedrive(f.dispatchId, result.dispatchId);
      answers[index] = {
        dispatchId: f.dispatchId,
        redrivenTo: result.dispatchId,
        created: !result.deduplicated,
      };
    }),
  );
  return answers;
}

/** A dead letter found, with what its redrive sends. */
export interface Candidate extends DeadLetter {
  readonly store: DispatchStore;
  readonly prompt: string;
  readonly meta: Record<string, unknown> | undefined;
  readonly enqueuedAt: number;
}

/** The dead letter `dispatchId` in whichever shard holds it, or why it cannot be redriven. */
export async function findDeadLetter(
  shards: readonly RedriveShard[],
  dispatchId: string,
): Promise<Candidate | NotRedrivableError> {
  const records = await Promise.all(shards.map((s) => s.store.sends.get(dispatchId)));
  const at = records.findIndex((r) => r !== undefined);
  const record = records[at];
  const store = shards[at]?.store;
  if (!record || !store)
    return new NotRedrivableError(dispatchId, 'unknown', 'no such follow-up (or expired)');
  if (record.state !== 'done')
    return new NotRedrivableError(
      dispatchId,
      'not_ended',
      `it has not ended (${record.state}); only one that ended undeliverable or timed out can be`,
    );
  if (!record.type || !REDRIVABLE.has(record.type))
    return new NotRedrivableError(
      dispatchId,
      'not_dead_letter',
      `it ended ${record.type ?? 'without a type'}; only one that ended undeliverable or timed out can be`,
    );
  if (record.after !== undefined && record.target === undefined)
    return new NotRedrivableError(
      dispatchId,
      'job_not_created',
      `it was chained to creation ${record.after}, which made no job to send it to; create again and chain anew`,
    );
  const { redrivenTo } = record;
  if (redrivenTo === undefined && record.prompt === undefined)
    return new NotRedrivableError(
      dispatchId,
      'prompt_gone',
      'its prompt is no longer kept (DEAD_LETTER_RETENTION passed, or it ended before prompts were kept)',
    );
  return {
    store,
    dispatchId,
    projectId: record.projectId,
    // A follow-up chained to a creation goes again to the job it went to (its lane is gone).
    jobId: record.target ?? record.jobId,
    type: record.type,
    reason: record.reason ?? '',
    finishedAt: record.finishedAt ?? 0,
    prompt: record.prompt ?? '',
    meta: record.meta,
    enqueuedAt: record.enqueuedAt,
    redrivenTo,
  };
}
