import type { Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import type { Registration } from '../dispatch/store.js';
import { NotDurableError, type DiskWait } from '../redis/disk-wait.js';
import type { DurabilityAssessment } from '../redis/durability.js';
import { keysFor } from '../redis/keys.js';
import { ClaimReleasedError, claimKeys, replaceReleased } from './claims.js';
import { asRedisFailure, RedisUnavailableError, type SendResult } from './errors.js';
import { mergeShardResults, splitByShard, type ProducerShard } from './shards.js';
import { enqueueIn, type EnqueueContext } from './transaction.js';

/**
 * A batch from the producer to Redis: its keys claimed across shards (`claims.ts`, with more than
 * one shard), then one transaction per shard, in parallel, each waited on disk (`enqueueIn`); the
 * answers in input order (`mergeShardResults`). A keyed follow-up costs, besides its shard's
 * MULTI, its part of one claim script call per shard that holds claims of the batch; one shard
 * claims nothing.
 */
export async function enqueueByShard(
  ctx: EnqueueContext,
  client: Redis,
  shards: readonly ProducerShard[],
  followUps: readonly FollowUp[],
  traceparents: readonly (string | undefined)[],
): Promise<SendResult[]> {
  // Before any read or write: a strict setting the server cannot keep refuses the batch.
  const assessed = await ctx.disk.assess(client);
  const claimShards = shards.map((s) => ({ store: s.store(client), prefix: s.shard.prefix }));
  const wait = claimWait(client, ctx.disk.timeoutMs, assessed);
  const { tokens, conflicts } = await claimKeys(client, claimShards, followUps, wait).catch(
    (err: unknown) => {
      throw err instanceof NotDurableError
        ? new RedisUnavailableError(`${err.message}; retry with the same key`, err)
        : asRedisFailure(err, ctx.redis);
    },
  );
  const refused = new Set(conflicts.map((c) => c.index ?? -1));
  const batches = splitByShard(followUps, shards.length, refused);
  const settled = await Promise.allSettled(
    batches.map((b) => {
      const { queue, store, shard } = shards[b.shard] as ProducerShard;
      const target = { queue, store: store(client), nodeKey: keysFor(shard.prefix).open };
      const registrations = b.indexes.map((i): Registration => ({
        ...(followUps[i] as FollowUp),
        traceparent: traceparents[i],
        claimToken: tokens[i],
      }));
      return enqueueIn(ctx, client, assessed, target, registrations);
    }),
  );
  const released = settled.flatMap((s) =>
    s.status === 'rejected' && s.reason instanceof ClaimReleasedError ? s.reason.released : [],
  );
  // Best effort: the batch fails as retryable whatever this does, and the retry claims again.
  if (released.length > 0)
    await replaceReleased(client, claimShards, released, wait).catch(() => undefined);
  return mergeShardResults(followUps.length, batches, settled, conflicts);
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
