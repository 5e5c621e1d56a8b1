import type { Queue } from 'bullmq';
import type { ChainableCommander, Redis } from 'ioredis';
import {
  dispatchJobJson,
  dispatchJobOptions,
  newDispatchId,
  type DispatchJobData,
} from '../store/register.js';
import type { DispatchStore, Registration } from '../store/store.js';
import { afterWrite, beforeWrite, type DiskWait } from '../redis/disk-wait.js';
import type { DurabilityAssessment } from '../redis/durability.js';
import { controlFailure, type DiskGuard } from './disk.js';
import { ClaimReleasedError, type ReleasedClaim } from './claims.js';
import { backlogRefusal, refuseEarly } from './backlog.js';
import { settleJobs } from './revive.js';
import {
  asRedisFailure,
  IdempotencyConflictError,
  RedisUnavailableError,
  type KeyConflict,
  type SendResult,
} from './errors.js';

/**
 * The producer's one transaction per shard: one REGISTER of the whole batch, then BullMQ's job add
 * per follow-up, in one MULTI on BullMQ's connection, so a follow-up's record and its job both land
 * or neither does; then the wait for the disk (`REDIS_DURABILITY`) before the answers. A traced
 * follow-up's `traceparent` rides in both, in the same commands: tracing adds no round trip.
 *
 * Scripts: REGISTER is loaded at the start of every MULTI, so it can never be missing when it
 * runs. BullMQ's job add, a much larger script, is sent as ioredis sends it: its source once per
 * connection, then by SHA. If the server forgot it (SCRIPT FLUSH, or a restart behind a kept
 * connection), the adds fail NOSCRIPT inside the committed MULTI while the REGISTER landed: a
 * record without its job, which {@link addMissingJobs} completes at once with a second MULTI that
 * loads the add first (adding an existing job id is a no-op in BullMQ). Then `settleJobs`
 * (revive.ts) withdraws the jobs of a failed REGISTER and replaces an ended one a record needs.
 */

/** A MULTI as BullMQ's job add takes it. */
type BullTransaction = Parameters<Queue['backend']['addJobToTransaction']>[0];

/** BullMQ's scripts the transaction runs by SHA (its job add, without delay or priority). */
const BULLMQ_SCRIPTS = ['addStandardJob'];

/**
 * A MULTI ready to EXEC: its ids, the replies before REGISTER's, its REGISTER calls (one per
 * thousand follow-ups, an answer per id each, in order); add `i` replies `registers + i` later.
 */
export interface Transaction {
  readonly multi: ChainableCommander;
  readonly ids: readonly string[];
  readonly loads: number;
  readonly registers: number;
  /** What REGISTER wrote for each id, in order: the follow-up and its `traceparent`. */
  readonly registrations: readonly Registration[];
}

/** Where the reply of the job add of the `i`th follow-up is. */
const addReply = ({ loads, registers }: Transaction, i: number) => loads + registers + i;

/** What enqueueing needs besides the batch: the producer's connection, its attempts, the disk. */
export interface EnqueueContext {
  /** The producer's connection, whose state tells a Redis failure's kind. */
  readonly redis: Redis;
  readonly attempts: number;
  readonly disk: DiskGuard;
}

/** Where one shard's transaction goes: its queue, its store on `client`, and a key of it. */
export interface ShardTarget {
  readonly queue: Queue<DispatchJobData>;
  readonly store: DispatchStore;
  /** A key of the shard: in a cluster, it names the node whose disk is waited for. */
  readonly nodeKey: string;
}

/**
 * One shard's transaction, on the server's assessment (`DiskGuard.assess`), to the answers: built,
 * marked for the disk, run, its missing jobs added, then waited on disk. A timeout of that wait is
 * a retryable failure: the follow-ups may or may not be kept, so retry with the same key.
 */
export async function enqueueIn(
  { redis, attempts, disk }: EnqueueContext,
  client: Redis,
  assessed: DurabilityAssessment,
  { queue, store, nodeKey }: ShardTarget,
  followUps: readonly Registration[],
): Promise<SendResult[]> {
  const wait: DiskWait = { timeoutMs: disk.timeoutMs, assessment: async () => assessed };
  await refuseEarly(store, followUps).catch((err: unknown) => {
    throw asRedisFailure(err, redis);
  });
  const transaction = await buildTransaction(queue, client, store, followUps, attempts);
  const mark = await beforeWrite(wait, client, nodeKey);
  const first = await execute(transaction, redis);
  const replies = await addMissingJobs(queue, client, transaction, first, attempts)
    .then((all) => settleJobs(queue, store, transaction, all, attempts))
    .catch((err: unknown) => {
      throw asRedisFailure(err, redis);
    });
  await afterWrite(wait, mark).catch((err: unknown) => {
    throw controlFailure(err, redis, 'retry with the same key');
  });
  return resultsOf(followUps, transaction, replies, redis);
}

/** Builds the transaction. `store` must be a store on `client`. */
async function buildTransaction(
  queue: Queue<DispatchJobData>,
  client: Redis,
  store: DispatchStore,
  registrations: readonly Registration[],
  attempts: number,
): Promise<Transaction> {
  const multi = client.multi();
  const ids = registrations.map((f) => f.dispatchId ?? newDispatchId(f.key));
  const { loads, registers } = store.register.into(multi, ids, registrations);
  await Promise.all(
    registrations.map((registration, i) =>
      addJobInto(queue, multi, ids[i] as string, registration, attempts),
    ),
  );
  return { multi, ids, loads, registers, registrations };
}

/**
 * Queues BullMQ's add of the job that carries `dispatchId` on `multi`. BullMQ queues it before
 * its promise settles, so a batch's adds are queued in order without waiting for each.
 */
function addJobInto(
  queue: Queue<DispatchJobData>,
  multi: ChainableCommander,
  dispatchId: string,
  followUp: Registration,
  attempts: number,
): Promise<string> {
  const ref = {
    dispatchId,
    projectId: followUp.projectId,
    jobId: followUp.jobId,
    traceparent: followUp.traceparent,
  };
  return queue.backend.addJobToTransaction(
    multi as unknown as BullTransaction,
    dispatchJobJson(ref, dispatchJobOptions(attempts)),
    dispatchId,
  );
}

/** Whether a reply is the server's "no script with that SHA". */
function isNoScript(err: Error | null | undefined): boolean {
  return err?.message.startsWith('NOSCRIPT') === true;
}

/**
 * After a committed transaction whose job adds failed NOSCRIPT (their REGISTER landed): loads
 * BullMQ's add and adds those jobs in a second MULTI. Resolves to the replies with the first
 * MULTI's NOSCRIPT errors replaced by the second's answers; the replies as they were when no add
 * failed that way.
 */
async function addMissingJobs(
  queue: Queue<DispatchJobData>,
  client: Redis,
  transaction: Transaction,
  replies: readonly [Error | null, unknown][],
  attempts: number,
): Promise<[Error | null, unknown][]> {
  const { ids, registrations } = transaction;
  const missing = ids.flatMap((_, i) =>
    isNoScript(replies[addReply(transaction, i)]?.[0]) ? [i] : [],
  );
  if (missing.length === 0) return [...replies];
  const multi = client.multi();
  const sources = bullmqSources(client);
  for (const source of sources) multi.script('LOAD', source);
  const reloads = sources.length;
  await Promise.all(
    missing.map((i) =>
      addJobInto(queue, multi, ids[i] as string, registrations[i] as Registration, attempts),
    ),
  );
  const again = await multi.exec();
  if (!again) throw discarded();
  const merged = [...replies];
  for (const [n, i] of missing.entries()) {
    merged[addReply(transaction, i)] = again[reloads + n] ?? [new Error('no reply'), null];
  }
  return merged;
}

/** Runs the transaction; a failure or a discarded transaction is a retryable Redis failure. */
async function execute({ multi }: Transaction, redis: Redis): Promise<[Error | null, unknown][]> {
  const replies = await multi.exec().catch((err: unknown) => {
    throw asRedisFailure(err, redis);
  });
  if (!replies) throw discarded();
  return replies;
}

/** A MULTI whose EXEC answered null (a WATCH broke it, or Redis discarded it): retryable. */
function discarded(): RedisUnavailableError {
  return new RedisUnavailableError('Redis discarded the transaction; retry it with the same key');
}

/** The sources of {@link BULLMQ_SCRIPTS} as BullMQ defined them on `client` (`name:version`). */
function bullmqSources(client: Redis): string[] {
  const defined = client.scriptsSet as Record<string, { lua: string } | undefined>;
  return Object.entries(defined).flatMap(([name, script]) =>
    script && BULLMQ_SCRIPTS.includes(name.split(':')[0] ?? '') ? [script.lua] : [],
  );
}

/**
 * The answers of a committed transaction (its replies after the script loads): REGISTER answers,
 * per follow-up, 1 new, 0 the same content under the same key (deduplicated), -1 different content
 * under that key (a conflict), -2 its key's claim was released while this send was slow (see
 * `claims.ts`): nothing was registered for it, and the batch fails as retryable; -3 chained to
 * a creation of the same call refused for a conflict (`after`): refused with it. */
function resultsOf(
  followUps: readonly Registration[],
  transaction: Transaction,
  replies: readonly [Error | null, unknown][],
  redis: Redis,
): SendResult[] {
  const { ids, loads, registers } = transaction;
  const conflicts: KeyConflict[] = [];
  const registered = replies.slice(loads, loads + registers);
  const full = backlogRefusal(registered);
  if (full) throw full;
  const answers = registered.flatMap(([, answer]) => (Array.isArray(answer) ? answer : []));
  const registerErr =
    registered.find(([err]) => err)?.[0] ??
    (answers.length === ids.length ? null : new Error('REGISTER answered for too few follow-ups'));
  const released: ReleasedClaim[] = [];
  const results = ids.map((dispatchId, i): SendResult | null => {
    const [addErr] = replies[addReply(transaction, i)] ?? [new Error('no reply')];
    if (registerErr || addErr) throw asRedisFailure(registerErr ?? addErr, redis);
    const created = (answers as unknown[])[i];
    const { projectId, claimToken, key = '', after } = followUps[i] ?? {};
    if (created === -2 && projectId && claimToken)
      released.push({ index: i, dispatchId, projectId, claimToken });
    if (created === -2) return null;
    if (created !== -1 && created !== -3) return { dispatchId, deduplicated: created === 0 };
    conflicts.push({ index: i, key, dispatchId, after: created === -3 ? after : undefined });
    return null;
  });
  if (released.length > 0) throw new ClaimReleasedError(released, results, conflicts);
  if (conflicts.length > 0) throw new IdempotencyConflictError(conflicts, results);
  return results as SendResult[];
}
