import type { Redis } from 'ioredis';
import type { DurabilityAssessment } from './durability.js';

/** How long a master's count of replicas is trusted before it is asked again (ROLE). */
const REPLICA_COUNT_MS = 1_000;

const replicaCounts = new WeakMap<Redis, { readonly count: number; readonly at: number }>();

/**
 * The replicas WAITAOF waits for on `node`: `REDIS_DURABILITY`'s N, or fewer when the master has
 * fewer replicas now (unless the setting is strict). After a failover the promoted replica has
 * none until another one syncs from it; waiting for N there would stop every write of its slots
 * for good, where the write is still fsynced on every copy there is.
 */
export async function replicasToWaitFor(
  node: Redis,
  assessment: Pick<DurabilityAssessment, 'replicas' | 'strict'>,
): Promise<number> {
  if (assessment.replicas === 0 || assessment.strict) return assessment.replicas;
  let known = replicaCounts.get(node);
  if (!known || Date.now() - known.at > REPLICA_COUNT_MS) {
    const role = (await node.call('ROLE')) as unknown[];
    const count = role[0] === 'master' && Array.isArray(role[2]) ? role[2].length : 0;
    known = { count, at: Date.now() };
    replicaCounts.set(node, known);
  }
  return Math.min(assessment.replicas, known.count);
}

/** Drops `node`'s count: a replica may have gone since it was counted (a wait fell short). */
export function forgetReplicaCount(node: Redis): void {
  replicaCounts.delete(node);
}
