import type { Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import type { DiskWait } from '../redis/disk-wait.js';
import type { DurabilityAssessment } from '../redis/durability.js';
import type { Registration } from '../store/store.js';
import { chainedToRefused } from './chained.js';
import {
  ClaimReleasedError,
  claimKeys,
  replaceReleased,
  type ClaimShard,
  type ReleasedClaim,
} from './claims.js';
import { controlFailure, type DiskGuard } from './disk.js';
import { IdempotencyConflictError, type KeyConflict, type SendResult } from './errors.js';
import type { ProducerShard } from './fleet.js';

/**
 * What a batch's idempotency keys cost it besides its MULTIs: their claims across shards (more
 * than one shard; the scripts' side is `claims.ts`), what REGISTER refused for a key (another
 * content under it -1, chained to a creation refused so -3, its claim released while the send was
 * slow -2), and the released ones sent once more, at once: the rest of their transaction was
 * committed, so failing the batch would have its caller enqueue those again. A batch on one
 * shard, or without a key, that REGISTER answered throughout needs nothing of this file
 * (`enqueue.ts` runs the batch).
 */

/** Where the claims of a batch are: its connection, its shards' stores, the wait for the disk. */
export interface Claims {
  readonly client: Redis;
  readonly shards: readonly ClaimShard[];
  readonly wait: DiskWait | undefined;
}

/**
 * The claims of a batch on `shards`: each shard's store on `client`, and on a cluster only (where
 * a claim and its record live on two masters) the wait for their disk.
 */
export function claimsOf(
  client: Redis,
  shards: readonly ProducerShard[],
  disk: DiskGuard,
  assessed: DurabilityAssessment,
): Claims {
  return {
    client,
    shards: shards.map((s) => ({ store: s.store(client), prefix: s.shard.prefix })),
    wait: client.isCluster
      ? { timeoutMs: disk.timeoutMs, assessment: async () => assessed }
      : undefined,
  };
}

/**
 * Claims the keys of `followUps` (`claimKeys`): each position's claim token, and the follow-ups
 * refused before any transaction: a key claimed for another shard, and those chained to a
 * creation refused so. A failure is retryable (`redis`, the producer's connection): nothing was
 * registered yet.
 */
export async function claimBatch(
  claims: Claims,
  followUps: readonly FollowUp[],
  redis: Redis,
): Promise<{ tokens: readonly (string | undefined)[]; refused: KeyConflict[] }> {
  const { client, shards, wait } = claims;
  const { tokens, conflicts } = await claimKeys(client, shards, followUps, wait).catch(
    (err: unknown) => {
      throw controlFailure(err, redis, 'retry with the same key');
    },
  );
  return { tokens, refused: [...conflicts, ...chainedToRefused(followUps, conflicts)] };
}

/** Whether `reason` (a shard's failed transaction) is a {@link ClaimReleasedError} with claims. */
export function isReleased(reason: unknown): boolean {
  return reason instanceof ClaimReleasedError && reason.released.length > 0;
}

/**
 * The error of one transaction whose REGISTER refused follow-ups (`created`, its answers, `null`
 * in `results` for each): -1 another content under the key (a conflict); -2 the key's claim was
 * released while this send was slow (`claims.ts`): nothing was registered for it, and the batch
 * fails as retryable ({@link ClaimReleasedError}); -3 chained to a creation of the same call
 * refused for a conflict (`after`): refused with it. Conflicts are an
 * {@link IdempotencyConflictError}; `undefined` when neither applies.
 */
export function refusalOf(
  followUps: readonly Registration[],
  ids: readonly string[],
  created: readonly unknown[],
  results: readonly (SendResult | null)[],
): Error | undefined {
  const conflicts: KeyConflict[] = [];
  const released: ReleasedClaim[] = [];
  for (const [i, dispatchId] of ids.entries()) {
    const { projectId, claimToken, key = '', after } = followUps[i] ?? {};
    if (created[i] === -2 && projectId && claimToken)
      released.push({ index: i, dispatchId, projectId, claimToken });
    if (created[i] === -1 || created[i] === -3)
      conflicts.push({ index: i, key, dispatchId, after: created[i] === -3 ? after : undefined });
  }
  if (released.length > 0) return new ClaimReleasedError(released, results, conflicts);
  if (conflicts.length > 0) return new IdempotencyConflictError(conflicts, results);
  return undefined;
}

/**
 * The results of one shard's failed transaction, for the batch: its conflicts pushed onto
 * `conflicts` with batch indexes (`indexes`, the batch positions of its follow-ups); any other
 * failure is thrown.
 */
export function conflictedResults(
  reason: unknown,
  indexes: readonly number[],
  conflicts: KeyConflict[],
): readonly (SendResult | null)[] {
  if (!(reason instanceof IdempotencyConflictError)) throw reason;
  for (const c of reason.conflicts) conflicts.push({ ...c, index: indexes[c.index ?? 0] ?? 0 });
  return reason.results;
}

/** What a send of some follow-ups answered: per follow-up its result, `null` where a conflict. */
interface Answered {
  readonly results: readonly (SendResult | null)[];
  readonly conflicts: readonly KeyConflict[];
}

/**
 * Makes the claims of the {@link ClaimReleasedError}s of `settled` again, then (with `send`) sends
 * their follow-ups again (`pick` takes them, by their positions, from the batch's arrays), and
 * replaces each such outcome, in
 * place, by its transaction's answers completed with theirs: new, deduplicated, or a conflict
 * (their key was claimed for another shard meanwhile: a producer that stalled past the repair
 * age).
 */
export async function sendReleasedAgain(
  claims: Claims,
  batches: readonly { readonly indexes: readonly number[] }[],
  settled: PromiseSettledResult<SendResult[]>[],
  send: ((pick: <T>(from: readonly T[]) => T[]) => Promise<SendResult[]>) | undefined,
): Promise<void> {
  const released = settled.flatMap((s) =>
    s.status === 'rejected' && s.reason instanceof ClaimReleasedError ? s.reason.released : [],
  );
  // Best effort: whatever this does, the claims are made again by the send that follows.
  await replaceReleased(claims.client, claims.shards, released, claims.wait).catch(() => undefined);
  if (!send) return;
  const items = settled.flatMap((s, b) =>
    s.status === 'rejected' && s.reason instanceof ClaimReleasedError
      ? s.reason.released.map((r) => batches[b]?.indexes[r.index] ?? -1)
      : [],
  );
  const pick = <T>(from: readonly T[]): T[] => items.map((i) => from[i] as T);
  const answered: Answered = await send(pick).then(
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
