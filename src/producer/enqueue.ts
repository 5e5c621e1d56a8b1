import type { Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import type { Registration } from '../store/store.js';
import type { DiskWait } from '../redis/disk-wait.js';
import type { DurabilityAssessment } from '../redis/durability.js';
import { keysFor, shardOf } from '../redis/keys.js';
import { afterDigests, chainedToRefused } from './chained.js';
import { ClaimReleasedError, claimKeys, replaceReleased } from './claims.js';
import { controlFailure } from './disk.js';
import { IdempotencyConflictError, type KeyConflict, type SendResult } from './errors.js';
import type { ProducerShard } from './shards.js';
import { enqueueIn, type EnqueueContext } from './transaction.js';

/**
 * A batch from the producer to Redis: its keys claimed across shards (`claims.ts`, with more than
 * one shard), then one transaction per shard, in parallel, each waited on disk (`enqueueIn`); the
 * answers in input order (`mergeShardResults`). A keyed follow-up costs, besides its shard's
 * MULTI, its part of one claim script call per shard that holds claims of the batch; one shard
 * claims nothing. Follow-ups whose claim REGISTER found released are sent once more, at once
 * ({@link sendReleasedAgain}): the rest of their transaction was committed, so failing the batch
 * would have its caller enqueue those again.
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
  const claimShards = shards.map((s) => ({ store: s.store(client), prefix: s.shard.prefix }));
  const wait = claimWait(client, ctx.disk.timeoutMs, assessed);
  const { tokens, conflicts } = await claimKeys(client, claimShards, followUps, wait).catch(
    (err: unknown) => {
      // Retryable: nothing was registered yet.
      throw controlFailure(err, ctx.redis, 'retry with the same key');
    },
  );
  // The follow-ups chained to a creation whose claim was refused are refused with it.
  const refused = [...conflicts, ...chainedToRefused(followUps, conflicts)];
  const batches = splitByShard(
    followUps,
    shards.length,
    new Set(refused.map((c) => c.index ?? -1)),
  );
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
  const released = settled.flatMap((s) =>
    s.status === 'rejected' && s.reason instanceof ClaimReleasedError ? s.reason.released : [],
  );
  if (released.length === 0) return mergeShardResults(followUps.length, batches, settled, refused);
  // Best effort: whatever this does, the claims are made again by the send that follows.
  await replaceReleased(client, claimShards, released, wait).catch(() => undefined);
  const pick = <T>(items: readonly number[], from: readonly T[]) => items.map((i) => from[i] as T);
  if (again)
    await sendReleasedAgain(batches, settled, (items) =>
      enqueueByShard(ctx, client, shards, pick(items, followUps), pick(items, traceparents), false),
    );
  return mergeShardResults(followUps.length, batches, settled, refused);
}

/** What a send of some follow-ups answered: per follow-up its result, `null` where a conflict. */
interface Answered {
  readonly results: readonly (SendResult | null)[];
  readonly conflicts: readonly KeyConflict[];
}

/**
 * Sends the follow-ups of each {@link ClaimReleasedError} of `settled` again with `send` (by their
 * positions in the batch), and replaces that outcome, in place, by its transaction's answers
 * completed with theirs: new, deduplicated, or a conflict (their key was claimed for another
 * shard meanwhile: a producer that stalled past the repair age).
 */
async function sendReleasedAgain(
  batches: readonly ShardBatch[],
  settled: PromiseSettledResult<SendResult[]>[],
  send: (items: readonly number[]) => Promise<SendResult[]>,
): Promise<void> {
  const items = settled.flatMap((s, b) =>
    s.status === 'rejected' && s.reason instanceof ClaimReleasedError
      ? s.reason.released.map((r) => batches[b]?.indexes[r.index] ?? -1)
      : [],
  );
  const answered: Answered = await send(items).then(
    (results) => ({ results, conflicts: [] }),
    (err: unknown) => {
      if (err instanceof IdempotencyConflictError) return err;
      throw err;
    },
  );
  for (const [b, outcome] of settled.entries()) {
    if (outcome.status !== 'rejected' || !(outcome.reason instanceof ClaimReleasedError)) continue;
    settled[b] = completed(batches[b]?.indexes ?? [], outcome.reason, items, answered);
  }
}

/**
 * One transaction's outcome (`err`, of the follow-ups at `indexes` of the batch) completed with
 * what the send of `items` (positions in the batch) answered.
 */
function completed(
  indexes: readonly number[],
  err: ClaimReleasedError,
  items: readonly number[],
  again: Answered,
): PromiseSettledResult<SendResult[]> {
  const inItems = new Map(items.map((item, k) => [item, k]));
  const local = new Map(indexes.map((item, j) => [item, j]));
  const results = err.results.map(
    (r, j) => r ?? again.results[inItems.get(indexes[j] ?? -1) ?? -1] ?? null,
  );
  const conflicts = [...err.conflicts];
  for (const c of again.conflicts) {
    const j = local.get(items[c.index ?? 0] ?? -1);
    if (j !== undefined) conflicts.push({ ...c, index: j });
  }
  return conflicts.length > 0
    ? { status: 'rejected', reason: new IdempotencyConflictError(conflicts, results) }
    : { status: 'fulfilled', value: results as SendResult[] };
}

/**
 * The wait for the claims' disk: on a cluster only, where a claim and its record live on two
 * masters (see `claimKeys`).
 */
function claimWait(
  client: Redis,
  timeoutMs: number,
  assessed: DurabilityAssessment,
): DiskWait | undefined {
  return client.isCluster ? { timeoutMs, assessment: async () => assessed } : undefined;
}

/** The follow-ups of a batch that go to one shard, with their positions in the batch. */
export interface ShardBatch {
  readonly shard: number;
  readonly indexes: number[];
  readonly followUps: FollowUp[];
}

/**
 * Splits a batch by the shard of each follow-up's project, keeping input order within each, and
 * leaving out the positions in `refused`.
 */
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
 * or one `refused` before the transactions (a key claimed for another shard, `claims.ts`),
 * becomes one {@link IdempotencyConflictError} for the batch, with batch indexes, after every shard
 * committed; any other failure is rethrown (the first one).
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
    if (outcome.status === 'rejected') {
      if (!(outcome.reason instanceof IdempotencyConflictError)) throw outcome.reason;
      const err = outcome.reason;
      err.results.forEach((r, j) => (results[batch.indexes[j] ?? 0] = r));
      for (const c of err.conflicts)
        conflicts.push({ ...c, index: batch.indexes[c.index ?? 0] ?? 0 });
    } else {
      outcome.value.forEach((r, j) => (results[batch.indexes[j] ?? 0] = r));
    }
  }
  conflicts.sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
  if (conflicts.length > 0) throw new IdempotencyConflictError(conflicts, results);
  return results as SendResult[];
}
