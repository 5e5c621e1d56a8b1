import type { Dispatchable } from '../dispatch/creation.js';
import { contentDigest, newDispatchId } from '../store/register.js';
import type { KeyConflict } from './errors.js';

/**
 * The follow-ups of a batch chained (`after`) to a creation of the batch refused before its
 * transaction (its key claimed for another follow-up, `claims.ts`): refused with it, each a
 * conflict carrying `after`, as REGISTER refuses them (-3) within the transaction.
 */
export function chainedToRefused(
  followUps: readonly Dispatchable[],
  refused: readonly KeyConflict[],
): KeyConflict[] {
  const creations = new Set(
    refused.flatMap(({ index }) => {
      const creation = followUps[index ?? -1];
      return creation?.kind === 'create' && creation.dispatchId ? [creation.dispatchId] : [];
    }),
  );
  return followUps.flatMap((f, index) =>
    f.after && creations.has(f.after)
      ? [
          {
            index,
            key: f.key ?? '',
            dispatchId: f.dispatchId ?? newDispatchId(f.key),
            after: f.after,
          },
        ]
      : [],
  );
}

/**
 * The digest of the batch's keyed creation each follow-up is chained to (by position; none for
 * another): REGISTER refuses a chained follow-up (-3) whose creation's record holds another
 * digest, so a creation refused for its key in an earlier REGISTER call of the batch (another
 * chunk) takes its follow-ups along too.
 */
export function afterDigests(followUps: readonly Dispatchable[]): (string | undefined)[] {
  const digests = new Map<string, string>();
  for (const f of followUps)
    if (f.kind === 'create' && f.key !== undefined && f.dispatchId)
      digests.set(f.dispatchId, contentDigest(f));
  return followUps.map((f) => (f.after ? digests.get(f.after) : undefined));
}
