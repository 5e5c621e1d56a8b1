import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { FollowUp } from '../dispatch/followup.js';
import type { ClaimAnswer, ClaimRequest, DispatchStore } from '../store/store.js';
import { afterWrite, beforeWrite, type DiskWait } from '../redis/disk-wait.js';
import { claimShardOf, keysFor, shardOf } from '../redis/keys.js';
import { newDispatchId } from '../store/register.js';
import { RedisUnavailableError, type KeyConflict, type SendResult } from './errors.js';

/**
 * The producer's claims of a batch's idempotency keys, before its MULTIs (see
 * `store/claims.ts`): with more than one shard, each keyed follow-up is claimed for its
 * project's shard in the shard of its dispatch id, one script call per such shard, in parallel.
 * Claimed (or held for that shard already): REGISTER decides, under the claim's token, as on one
 * shard (new, deduplicated, or another content). Claimed for another shard: a conflict, nothing
 * written for it, unless that claim is older than {@link CLAIM_REPAIR_AGE_MS} and has no record,
 * which a producer that died between the claim and its MULTI leaves: it is fenced and replaced
 * (two more script calls, for those only). Within a batch the first project a key appears for
 * holds it. Nothing is claimed with one shard, nor for follow-ups without a key.
 */

/**
 * Age past which a claim for another shard with no record is taken for left behind and released.
 * A producer writes its record milliseconds after its claim; one slower than this (stalled, or
 * dead) is refused at its REGISTER if its claim was released meanwhile, so this bounds nothing
 * but how long a left claim refuses the key to other projects.
 * @defaultValue 30 s
 */
export const CLAIM_REPAIR_AGE_MS = 30_000;

/** A shard as the claims need it: its store on the producer's client, and its key prefix. */
export interface ClaimShard {
  readonly store: DispatchStore;
  readonly prefix: string;
}

/** What the claims decided: each position's claim token (none: unkeyed), and the conflicts. */
export interface ClaimOutcome {
  readonly tokens: readonly (string | undefined)[];
  readonly conflicts: readonly KeyConflict[];
}

interface Keyed extends ClaimRequest {
  readonly index: number;
  readonly key: string;
}

/**
 * Whether a batch has keys to claim across shards: only with several shards (one shard's REGISTER
 * settles its own keys) and a follow-up with a key.
 */
export function hasKeysToClaim(followUps: readonly FollowUp[], shardCount: number): boolean {
  return shardCount > 1 && followUps.some((f) => f.key !== undefined);
}

/**
 * Claims the keys of `followUps` (see above). `wait`, on a cluster, makes each shard's claims
 * durable before this resolves: a claim on one master must not be lost in a crash while its
 * record, written after it on another, survives. On one Redis the record's own wait covers the
 * claim, written before it on the same connection (the AOF keeps the order).
 */
export async function claimKeys(
  client: Redis,
  shards: readonly ClaimShard[],
  followUps: readonly FollowUp[],
  wait: DiskWait | undefined,
): Promise<ClaimOutcome> {
  const count = shards.length;
  if (!hasKeysToClaim(followUps, count)) return { tokens: [], conflicts: [] };
  const token = randomUUID();
  const keyed: Keyed[] = followUps.flatMap(({ key, projectId }, index) =>
    key === undefined
      ? []
      : [{ index, key, dispatchId: newDispatchId(key), shard: shardOf(projectId, count), token }],
  );
  const claimIn = (requests: readonly Keyed[]) => claimAll(client, shards, requests, wait);
  const answers = await claimIn(keyed);
  await releaseLeftClaims(client, shards, keyed, answers, wait, claimIn);
  const tokens: (string | undefined)[] = [];
  const conflicts: KeyConflict[] = [];
  for (const [i, { index, key, dispatchId }] of keyed.entries()) {
    const answer = answers[i] as ClaimAnswer;
    if (answer.kind === 'taken') conflicts.push({ index, key, dispatchId });
    else tokens[index] = answer.token;
  }
  return { tokens, conflicts };
}

/**
 * Replaces the claims that REGISTER found released (a producer may have died between fencing a
 * claim and replacing it, which refuses its key for the claim's lifetime): each by a claim of
 * this producer for the same shard, if it still holds the released token. The caller's retry
 * then registers.
 */
export async function replaceReleased(
  client: Redis,
  shards: readonly ClaimShard[],
  released: readonly ReleasedClaim[],
  wait: DiskWait | undefined,
): Promise<void> {
  const count = shards.length;
  const token = randomUUID();
  const requests = released.map((r) => ({
    dispatchId: r.dispatchId,
    shard: shardOf(r.projectId, count),
    token,
    replaces: r.claimToken,
  }));
  await claimAll(client, shards, requests, wait);
}

/** Claims `requests`, each in the shard of its dispatch id, where a key's claim lives. */
function claimAll(
  client: Redis,
  shards: readonly ClaimShard[],
  requests: readonly ClaimRequest[],
  wait: DiskWait | undefined,
): Promise<ClaimAnswer[]> {
  const count = shards.length;
  return perShard(
    client,
    shards,
    requests,
    (r) => claimShardOf(r.dispatchId, count),
    wait,
    (s, rs) => s.claims.claim(rs),
  );
}

/**
 * Fences, in the shard they were made for, the claims for another shard older than
 * {@link CLAIM_REPAIR_AGE_MS}, and replaces those without a record by this batch's: `answers`
 * is updated in place.
 */
async function releaseLeftClaims(
  client: Redis,
  shards: readonly ClaimShard[],
  keyed: readonly Keyed[],
  answers: ClaimAnswer[],
  wait: DiskWait | undefined,
  claimIn: (requests: readonly Keyed[]) => Promise<ClaimAnswer[]>,
): Promise<void> {
  const left = keyed.flatMap((request, i) => {
    const answer = answers[i] as ClaimAnswer;
    return answer.kind === 'taken' && answer.ageMs >= CLAIM_REPAIR_AGE_MS
      ? [{ i, request, answer }]
      : [];
  });
  if (left.length === 0) return;
  const fenced = await perShard(
    client,
    shards,
    left,
    (l) => l.answer.shard,
    wait,
    (store, ls) =>
      store.claims.fence(
        ls.map((l) => ({ dispatchId: l.request.dispatchId, token: l.answer.token })),
      ),
  );
  const released = left.filter((_, j) => fenced[j] === true);
  const again = await claimIn(released.map((l) => ({ ...l.request, replaces: l.answer.token })));
  for (const [j, { i }] of released.entries()) answers[i] = again[j] as ClaimAnswer;
}

/**
 * Runs `call` once per shard on the items of that shard (`shardOfItem`), in parallel, on
 * `client`, each made durable as `wait` asks; the answers in the order of `items`.
 */
async function perShard<T, A>(
  client: Redis,
  shards: readonly ClaimShard[],
  items: readonly T[],
  shardOfItem: (item: T) => number,
  wait: DiskWait | undefined,
  call: (store: DispatchStore, items: T[]) => Promise<A[]>,
): Promise<A[]> {
  const groups = new Map<number, number[]>();
  for (const [i, item] of items.entries()) {
    const shard = shardOfItem(item);
    const positions = groups.get(shard);
    if (positions) positions.push(i);
    else groups.set(shard, [i]);
  }
  const answers: A[] = [];
  await Promise.all(
    [...groups].map(async ([shard, positions]) => {
      const target = shards[shard];
      if (!target) throw new Error(`no shard ${shard} among ${shards.length}`);
      const mark = await beforeWrite(wait, client, keysFor(target.prefix).open);
      const replies = await call(
        target.store,
        positions.map((i) => items[i] as T),
      );
      await afterWrite(wait, mark);
      for (const [j, i] of positions.entries()) answers[i] = replies[j] as A;
    }),
  );
  return answers;
}

/** A follow-up that REGISTER refused because its key's claim was released (answer -2). */
export interface ReleasedClaim {
  /** Its position in its shard's transaction. */
  readonly index: number;
  readonly dispatchId: string;
  readonly projectId: string;
  readonly claimToken: string;
}

/**
 * Some follow-ups were not registered: their keys' claims were released before their REGISTER
 * (see `claims.ts`); nothing was written for them. The rest of the same transaction was committed:
 * `results` and `conflicts` answer for it (`null` at each released or conflicting position), so
 * the producer can send the released ones again itself ({@link replaceReleased} first) and answer
 * the whole batch; a caller that gets this error (the second time in one call) retries with the
 * same key. Code `claim_released`.
 */
export class ClaimReleasedError extends RedisUnavailableError {
  override readonly code = 'claim_released';
  constructor(
    readonly released: readonly ReleasedClaim[],
    readonly results: readonly (SendResult | null)[] = [],
    readonly conflicts: readonly KeyConflict[] = [],
  ) {
    super(
      `key: the claim across shards of dispatch ${released.map((r) => r.dispatchId).join(', ')} was released before it was registered; nothing was enqueued for it: retry with the same key`,
    );
  }
}
