import { isCreation } from '../dispatch/creation.js';
import type { RoleContext } from '../runtime/role.js';
import type { DispatchRef } from '../store/store.js';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { endUndeliverable } from './endings.js';
import type { SendFailure } from './send-failure.js';

/**
 * What a creation changes in a send (see dispatch/creation.ts): its POST creates a job (`post`,
 * send.ts), and an answer it lost cannot be settled. A follow-up's outcome in doubt is settled
 * from its job's status; a creation's job has no id we know, and nothing lists a project's jobs,
 * so a creation whose answer was lost (a timeout or reset after the request was written, a worker
 * that died mid-send, a 2xx whose body names no job, a 5xx: a gateway may answer 502/504 after the
 * API created the job) ends `job.undeliverable` with reason `ambiguous`, and is never sent again:
 * sending it again could create a second job. Only a failure proven before the request was
 * written (a connect error, a regrant) queues a creation again.
 */

/**
 * Ends a creation whose outcome is unknown (`failure`, or an answer that named no job), and
 * answers what the processor returns; `undefined` for a follow-up, or a failure that is certain.
 */
export function endIfInDoubt(
  ctx: RoleContext,
  ref: DispatchRef,
  failure: SendFailure | 'no_job_id',
  log: Logger,
): Promise<string> | undefined {
  if (!isCreation(ref)) return undefined;
  if (!inDoubt(failure)) return undefined;
  const kind = typeof failure === 'string' ? failure : failure.kind;
  ctx.metrics.sends.inc({ outcome: 'ambiguous' });
  log.warn({ kind }, LIFECYCLE.followupAmbiguous);
  return endUndeliverable(ctx, ref, 'ambiguous', 'sending');
}

/** Whether a creation's failure leaves unknown whether a job was created. */
function inDoubt(failure: SendFailure | 'no_job_id'): boolean {
  if (typeof failure === 'string') return true;
  if (failure.kind === 'transient') return failure.reason === 'server';
  return failure.kind === 'ambiguous' || failure.kind === 'delivered';
}
