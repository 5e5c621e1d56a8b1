import { Job, type Queue } from 'bullmq';
import type { ChainableCommander, Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import {
  DISPATCH_JOB_NAME,
  dispatchJobOptions,
  newDispatchId,
  type DispatchJobData,
} from '../runtime/jobs.js';
import type { DispatchStore } from '../dispatch/store.js';
import {
  asRedisFailure,
  IdempotencyConflictError,
  RedisUnavailableError,
  type KeyConflict,
  type SendResult,
} from './errors.js';

/**
 * The producer's one transaction: per follow-up, REGISTER and BullMQ's job add, in one MULTI on
 * BullMQ's connection, so both land or neither does.
 */

/** A MULTI as BullMQ's job add takes it. */
type BullTransaction = Parameters<Queue['backend']['addJobToTransaction']>[0];

/** BullMQ's scripts the transaction runs by SHA (its job add, without delay or priority). */
const BULLMQ_SCRIPTS = ['addStandardJob'];

/** A MULTI ready to EXEC: the ids it registers, and how many replies come before theirs. */
export interface Transaction {
  readonly multi: ChainableCommander;
  readonly ids: readonly string[];
  readonly loads: number;
}

/**
 * Builds the transaction. It starts by loading the scripts it runs (see
 * {@link DispatchStore.loadScriptsInto}): a SCRIPT FLUSH between two sends cannot make it commit
 * half. `store` must be a store on `client`.
 */
export async function buildTransaction(
  queue: Queue<DispatchJobData>,
  client: Redis,
  store: DispatchStore,
  followUps: readonly FollowUp[],
  attempts: number,
): Promise<Transaction> {
  const multi = client.multi();
  const loads = store.loadScriptsInto(multi, bullmqSources(client));
  const ids = followUps.map((f) => newDispatchId(f.key));
  for (const [i, followUp] of followUps.entries()) {
    const dispatchId = ids[i] as string;
    store.registerInto(multi, dispatchId, followUp);
    const data: DispatchJobData = {
      v: 1,
      dispatchId,
      projectId: followUp.projectId,
      jobId: followUp.jobId,
    };
    const job = new Job(
      queue,
      DISPATCH_JOB_NAME,
      data,
      dispatchJobOptions(dispatchId, attempts),
      dispatchId,
    );
    await queue.backend.addJobToTransaction(
      multi as unknown as BullTransaction,
      job.asJSON(),
      dispatchId,
    );
  }
  return { multi, ids, loads };
}

/** Runs the transaction; a failure or a discarded transaction is a retryable Redis failure. */
export async function execute(
  { multi }: Transaction,
  redis: Redis,
): Promise<[Error | null, unknown][]> {
  const replies = await multi.exec().catch((err: unknown) => {
    throw asRedisFailure(err, redis);
  });
  if (!replies) throw new RedisUnavailableError('Redis discarded the transaction; retry it');
  return replies;
}

/** The sources of {@link BULLMQ_SCRIPTS} as BullMQ defined them on `client` (`name:version`). */
function bullmqSources(client: Redis): string[] {
  const defined = client.scriptsSet as Record<string, { lua: string } | undefined>;
  return Object.entries(defined).flatMap(([name, script]) =>
    script && BULLMQ_SCRIPTS.includes(name.split(':')[0] ?? '') ? [script.lua] : [],
  );
}

/**
 * The answers of a committed transaction (its replies after the script loads): REGISTER says 1
 * new, 0 the same content under the same key (deduplicated), -1 different content under that key
 * (a conflict).
 */
export function resultsOf(
  followUps: readonly FollowUp[],
  { ids, loads }: Transaction,
  replies: readonly [Error | null, unknown][],
  redis: Redis,
): SendResult[] {
  const conflicts: KeyConflict[] = [];
  const results = ids.map((dispatchId, i): SendResult | null => {
    const [registerErr, created] = replies[loads + 2 * i] ?? [new Error('no reply'), 0];
    const [addErr] = replies[loads + 2 * i + 1] ?? [new Error('no reply')];
    if (registerErr || addErr) throw asRedisFailure(registerErr ?? addErr, redis);
    if (created !== -1) return { dispatchId, deduplicated: created === 0 };
    conflicts.push({ index: i, key: followUps[i]?.key ?? '', dispatchId });
    return null;
  });
  if (conflicts.length > 0) throw new IdempotencyConflictError(conflicts, results);
  return results as SendResult[];
}
