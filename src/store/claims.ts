import type { Reply } from './lua.js';
import type { StoreState } from './store-state.js';

/**
 * The claims of idempotency keys across shards. A key derives its dispatch id, and a project lives
 * in one shard; so that the same new key sent at the same moment for projects of two shards is
 * accepted once, the shard that may register a keyed dispatch id is decided first, atomically, in
 * one place: the claim, kept in the shard of the dispatch id itself (`claimShardOf`). The producer
 * claims its keys there before its MULTIs, then registers (REGISTER, under the claim's token) only
 * what it claimed for its project's shard. Reached as `DispatchStore.claims`.
 *
 * A claim without its record (its producer died, or stalled, between the claim and its MULTI) is
 * released by the next send of the key for another project once it is older than the repair age:
 * the record's shard is asked first ({@link Claims.fence}), atomically with its record, so that the
 * stalled producer's late REGISTER is refused; then the claim is replaced ({@link Claims.claim}
 * with `replaces`). The next send of the key for the same project simply completes it.
 */

/** One key to claim in this shard: its dispatch id, its project's shard, this claim's token. */
export interface ClaimRequest {
  readonly dispatchId: string;
  readonly shard: number;
  readonly token: string;
  /** The token of a fenced claim to replace. */
  readonly replaces?: string | undefined;
}

/** What a claim found: see claim-n.lua. */
export interface ClaimAnswer {
  /** `claimed` now, `held` for the same shard already, `taken` for another shard. */
  readonly kind: 'claimed' | 'held' | 'taken';
  /** The claim's token (this one when `claimed`). */
  readonly token: string;
  readonly ageMs: number;
  /** The shard it is claimed for. */
  readonly shard: number;
}

/** One claim to fence in the shard it was made for. */
export interface FenceRequest {
  readonly dispatchId: string;
  readonly token: string;
}

/**
 * How long a claim lives, in multiples of the dispatch retention: a claim is renewed by every
 * send of its key for the same project, and must outlive the record it protects, which lives until
 * its follow-up ends, then the retention.
 */
const CLAIM_LIFETIMES = 2;

const KINDS = { 1: 'claimed', 0: 'held', [-1]: 'taken' } as const;

/** The claims of one shard's store. */
export class Claims {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /** Claims `requests` in this shard, in order (one script call); the answers in that order. */
  async claim(requests: readonly ClaimRequest[]): Promise<ClaimAnswer[]> {
    const { keys, options, scripts } = this.#state;
    const args: (string | number)[] = [options.retentionMs * CLAIM_LIFETIMES];
    for (const r of requests) args.push(r.shard, r.token, r.replaces ?? '');
    const reply = await scripts.run(
      'claim',
      requests.map((r) => keys.idempotencyClaim(r.dispatchId)),
      args,
    );
    return (reply as Reply[]).map((answer) => {
      const [code, token, ageMs, shard] = answer as [number, string, number, string | number];
      const kind = KINDS[code as keyof typeof KINDS];
      return { kind, token, ageMs, shard: Number(shard) };
    });
  }

  /**
   * In the shard the claims were made for: fences each claim whose record is not here (see
   * claimFence-n.lua). Per request, `true`: fenced, the claim may be replaced; `false`: its record
   * exists, the claim is complete.
   */
  async fence(requests: readonly FenceRequest[]): Promise<boolean[]> {
    const { keys, options, scripts } = this.#state;
    const reply = await scripts.run(
      'claimFence',
      requests.flatMap((r) => [keys.dispatch(r.dispatchId), keys.claimReleased(r.dispatchId)]),
      [options.retentionMs, ...requests.map((r) => r.token)],
    );
    return (reply as Reply[]).map((answer) => answer === 1);
  }
}
