import { createdLane, type Dispatchable, type Unresolved } from '../dispatch/creation.js';
import { InvalidFollowUpError, type FieldProblem } from '../dispatch/followup-problems.js';
import type { DispatchRecord } from '../dispatch/record.js';
import { newDispatchId } from '../store/register.js';

/**
 * Gives a batch's creations and chained follow-ups their lanes (see dispatch/creation.ts) before
 * REGISTER: a creation its dispatch id, fixed now (from its key, or random), and the lane named
 * after it; a chained follow-up the lane of the creation its `after` names, by dispatch id or by
 * idempotency key, found earlier in the same batch or in Redis (its record, in its project's
 * shard). An `after` that names no creation of the same project is an invalid input, and the
 * batch is refused whole, as for any invalid field.
 */

/** A creation found for an `after`: its dispatch id, project and lane. */
interface Creation {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly lane: string;
}

/** Reads the record of `dispatchId` in the shard of `projectId` (`undefined`: none). */
export type RecordLookup = (
  projectId: string,
  dispatchId: string,
) => Promise<DispatchRecord | undefined>;

/** `items`, checked, with their lanes; throws {@link InvalidFollowUpError} for a bad `after`. */
export async function resolveChains(
  items: readonly Unresolved[],
  lookup: RecordLookup,
  indexed: boolean,
): Promise<Dispatchable[]> {
  const inBatch = new Map<string, Creation>();
  const resolved: Dispatchable[] = [];
  const problems: FieldProblem[] = [];
  for (const [index, item] of items.entries()) {
    const { afterRef, ...rest } = item;
    if (rest.kind === 'create') {
      const dispatchId = newDispatchId(rest.key);
      const creation = { dispatchId, projectId: rest.projectId, lane: createdLane(dispatchId) };
      inBatch.set(dispatchId, creation);
      if (rest.key !== undefined) inBatch.set(rest.key, creation);
      resolved.push({ ...rest, dispatchId, jobId: creation.lane });
      continue;
    }
    if (afterRef === undefined) {
      resolved.push(rest);
      continue;
    }
    const creation = inBatch.get(afterRef) ?? (await stored(afterRef, rest.projectId, lookup));
    if (!creation || creation.projectId !== rest.projectId) {
      problems.push({
        field: 'after',
        message: 'names no creation of this project (its dispatch id or idempotency key)',
        ...(indexed ? { index } : {}),
      });
      continue;
    }
    resolved.push({ ...rest, after: creation.dispatchId, jobId: creation.lane });
  }
  if (problems.length > 0) throw new InvalidFollowUpError(problems);
  return resolved;
}

/** The creation `ref` names in Redis: its dispatch id, else the id its key is registered under. */
async function stored(
  ref: string,
  projectId: string,
  lookup: RecordLookup,
): Promise<Creation | undefined> {
  for (const dispatchId of new Set([ref, newDispatchId(ref)])) {
    const record = await lookup(projectId, dispatchId);
    if (record?.kind === 'create')
      return { dispatchId, projectId: record.projectId, lane: record.jobId };
  }
  return undefined;
}
