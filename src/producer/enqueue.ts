import type { Queue } from 'bullmq';
import type { ChainableCommander, Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import { afterWrite, beforeWrite, type DiskWait } from '../redis/disk-wait.js';
import type { DurabilityAssessment } from '../redis/durability.js';
import { keysFor, shardOf } from '../redis/keys.js';
import { dispatchJobJson, dispatchJobOptions, newDispatchId } from '../store/register.js';
import type { Registration } from '../store/store.js';
import { BacklogFullError, backlogRefusal } from './backlog.js';
import { afterDigests } from './chained.js';
import { hasKeysToClaim } from './claims.js';
import { controlFailure } from './disk.js';
import { asRedisFailure, discardedTransaction, IdempotencyConflictError } from './errors.js';
import type { EnqueueContext, Replies, ShardBatch, ShardTarget, Transaction } from './batch.js';
import type { KeyConflict, SendResult } from './errors.js';
import { addMissingJobs } from './missing-jobs.js';
import {
  claimBatch,
  claimsOf,
  conflictedResults,
  isReleased,
  refusalOf,
  sendReleasedAgain,
} from './idempotency.js';
import { settleJobs } from './revive.js';
import type { ProducerShard } from './fleet.js';

/**
 * A batch from the producer to Redis: per shard, in parallel, one REGISTER of its follow-ups and
 * BullMQ's job add of each in one MULTI on BullMQ's connection (a record and its job both land or
 * neither does; a `traceparent` rides in both), then the wait for the disk (`REDIS_DURABILITY`);
 * the answers in input order. Keys across shards and refusals: `idempotency.ts`; adds whose script
 * the server forgot: `missing-jobs.ts`; jobs to withdraw or revive after REGISTER: `revive.ts`.
 */
export async function enqueueByShard(
  ctx: EnqueueContext,
  client: Redis,
  shards: readonly ProducerShard[],
  followUps: readonly FollowUp[],
  traceparents: readonly (string | undefined)[],
  again = true,
): Promise<SendResult[]> {
  // Before any read or write: a strict setting the server cannot keep refuses the batch.
  const assessed = await ctx.disk.assess(client);
  // Keys are claimed across shards only when there are several (`idempotency.ts`).
  const { tokens, refused } = hasKeysToClaim(followUps, shards.length)
    ? await claimBatch(claimsOf(client, shards, ctx.disk, assessed), followUps, ctx.redis)
    : { tokens: [], refused: [] };
  const skip = new Set(refused.map((c) => c.index ?? -1));
  const batches = splitByShard(followUps, shards.length, skip);
  const digests = afterDigests(followUps);
  const registration = (i: number): Registration => ({
    ...(followUps[i] as FollowUp),
    traceparent: traceparents[i],
    claimToken: tokens[i],
    afterDigest: digests[i],
  });
  const settled = await Promise.allSettled(
    batches.map((b) => {
      const { queue, store, shard } = shards[b.shard] as ProducerShard;
      const target = { queue, store: store(client), nodeKey: keysFor(shard.prefix).open };
      return enqueueIn(ctx, client, assessed, target, b.indexes.map(registration));
    }),
  );
  if (settled.some((s) => s.status === 'rejected' && isReleased(s.reason))) {
    const claims = claimsOf(client, shards, ctx.disk, assessed);
    const send = (pick: <T>(from: readonly T[]) => T[]) =>
      enqueueByShard(ctx, client, shards, pick(followUps), pick(traceparents), false);
    await sendReleasedAgain(claims, batches, settled, again ? send : undefined);
  }
  return mergeShardResults(followUps.length, batches, settled, refused);
}

/** Splits a batch by its follow-ups' projects' shards, in input order, but the `refused` ones. */
export function splitByShard(
  followUps: readonly FollowUp[],
  count: number,
  refused: ReadonlySet<number> = new Set(),
): ShardBatch[] {
  const batches = new Map<number, ShardBatch>();
  for (const [index, followUp] of followUps.entries()) {
    if (refused.has(index)) continue;
    const shard = shardOf(followUp.projectId, count);
    let batch = batches.get(shard);
    if (!batch) batches.set(shard, (batch = { shard, indexes: [], followUps: [] }));
    batch.indexes.push(index);
    batch.followUps.push(followUp);
  }
  return [...batches.values()];
}

/**
 * Puts the answers of each shard's transaction back in input order. A key conflict in any shard,
 * or one `refused` before them (`idempotency.ts`), becomes one {@link IdempotencyConflictError}
 * for the batch, with batch indexes, after every shard committed; any other failure is rethrown.
 */
export function mergeShardResults(
  total: number,
  batches: readonly ShardBatch[],
  settled: readonly PromiseSettledResult<SendResult[]>[],
  refused: readonly KeyConflict[] = [],
): SendResult[] {
  const results: (SendResult | null)[] = new Array<SendResult | null>(total).fill(null);
  const conflicts: KeyConflict[] = [...refused];
  for (const [i, outcome] of settled.entries()) {
    const batch = batches[i];
    if (!batch) continue;
    const answered =
      outcome.status === 'fulfilled'
        ? outcome.value
        : conflictedResults(outcome.reason, batch.indexes, conflicts);
    answered.forEach((r, j) => (results[batch.indexes[j] ?? 0] = r));
  }
  conflicts.sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
  if (conflicts.length > 0) throw new IdempotencyConflictError(conflicts, results);
  return results as SendResult[];
}

/** Where the reply of the job add of the `i`th follow-up is. */
const addReply = ({ loads, registers }: Transaction, i: number) => loads + registers + i;

/**
 * One shard's transaction, on the server's assessment (`DiskGuard.assess`): built, marked for the
 * disk, run, then waited on disk; a timeout of that wait is retryable (retry with the same key).
 */
export async function enqueueIn(
  { redis, attempts, disk }: EnqueueContext,
  client: Redis,
  assessed: DurabilityAssessment,
  target: ShardTarget,
  followUps: readonly Registration[],
): Promise<SendResult[]> {
  const { queue, store, nodeKey } = target;
  const wait: DiskWait = { timeoutMs: disk.timeoutMs, assessment: async () => assessed };
  // Refused before anything is added when the store already sees the backlog full.
  const over = await store.register.backlogOver(followUps).catch((err: unknown) => {
    throw asRedisFailure(err, redis);
  });
  if (over) throw new BacklogFullError(over.projectId, over.queued, over.adding, over.retryMs);
  const transaction = await buildTransaction(target, client, followUps, attempts);
  const mark = await beforeWrite(wait, client, nodeKey);
  const first = await transaction.multi.exec().catch((err: unknown) => {
    throw asRedisFailure(err, redis);
  });
  if (!first) throw discardedTransaction();
  const failed = (err: unknown) => {
    throw asRedisFailure(err, redis);
  };
  const replies = await withMissingJobs(queue, client, transaction, first, attempts).catch(failed);
  const plain = isPlain(transaction, replies);
  if (!plain) await settleJobs(queue, store, transaction, replies, attempts).catch(failed);
  await afterWrite(wait, mark).catch((err: unknown) => {
    throw controlFailure(err, redis, 'retry with the same key');
  });
  return resultsOf(followUps, transaction, replies, redis, plain);
}

/** Builds the transaction. The target's store must be a store on `client`. */
async function buildTransaction(
  { queue, store }: ShardTarget,
  client: Redis,
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

/** Queues BullMQ's add of `dispatchId`'s job on `multi` (queued before its promise settles). */
function addJobInto(
  queue: ShardTarget['queue'],
  multi: ChainableCommander,
  dispatchId: string,
  { projectId, jobId, traceparent }: Registration,
  attempts: number,
): Promise<string> {
  const ref = { dispatchId, projectId, jobId, traceparent };
  const json = dispatchJobJson(ref, dispatchJobOptions(attempts));
  type BullTransaction = Parameters<Queue['backend']['addJobToTransaction']>[0];
  return queue.backend.addJobToTransaction(multi as unknown as BullTransaction, json, dispatchId);
}

/** The replies, with the job adds that failed NOSCRIPT made again (`missing-jobs.ts`). */
async function withMissingJobs(
  queue: ShardTarget['queue'],
  client: Redis,
  transaction: Transaction,
  replies: Replies,
  attempts: number,
): Promise<Replies> {
  const { ids, registrations } = transaction;
  const missing = ids.flatMap((_, i) =>
    replies[addReply(transaction, i)]?.[0]?.message.startsWith('NOSCRIPT') ? [i] : [],
  );
  if (missing.length === 0) return [...replies];
  const add = (multi: ChainableCommander, i: number) =>
    addJobInto(queue, multi, ids[i] as string, registrations[i] as Registration, attempts);
  return addMissingJobs(client, replies, missing, (i) => addReply(transaction, i), add);
}

/**
 * The answers of a committed transaction: REGISTER answers, per follow-up, 1 new (2: new, its job
 * revived), 0 the same content under the same key (deduplicated), -1 to -3 refused (`refusalOf`).
 * `plain`: what {@link isPlain} answered for them.
 */
function resultsOf(
  followUps: readonly Registration[],
  transaction: Transaction,
  replies: Replies,
  redis: Redis,
  plain: boolean,
): SendResult[] {
  const { ids, loads, registers } = transaction;
  const registered = replies.slice(loads, loads + registers);
  const full = plain ? undefined : backlogRefusal(registered);
  if (full) throw full;
  const answers = registered.flatMap(([, answer]) => (Array.isArray(answer) ? answer : []));
  const registerErr =
    registered.find(([err]) => err)?.[0] ??
    (answers.length === ids.length ? null : new Error('REGISTER answered for too few follow-ups'));
  const results = ids.map((dispatchId, i): SendResult | null => {
    const [addErr] = replies[addReply(transaction, i)] ?? [new Error('no reply')];
    if (registerErr || addErr) throw asRedisFailure(registerErr ?? addErr, redis);
    const created: unknown = answers[i];
    if (created === -1 || created === -2 || created === -3) return null;
    return { dispatchId, deduplicated: created === 0 };
  });
  const refused = results.includes(null) ? refusalOf(followUps, ids, answers, results) : undefined;
  if (refused) throw refused;
  return results as SendResult[];
}

/**
 * Whether REGISTER answered each follow-up new (1) or deduplicated (0): no REGISTER call failed
 * or refused the batch, and there are no jobs to settle (`revive.ts`).
 */
function isPlain({ loads, registers }: Transaction, replies: Replies): boolean {
  return replies
    .slice(loads, loads + registers)
    .every(
      ([err, answer]) => !err && Array.isArray(answer) && answer.every((a) => a === 0 || a === 1),
    );
}
