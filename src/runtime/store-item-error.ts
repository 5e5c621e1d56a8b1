import { StoreItemError } from '../store/call-batch.js';
import type { DispatchRef } from '../store/store.js';
import { LIFECYCLE } from '../telemetry/names.js';
import type { RoleContext } from './role.js';

/**
 * How long a follow-up whose store write failed alone (`StoreItemError`) waits before it tries
 * again: its key stays broken until an operator repairs it, and each try logs one line.
 */
export const STORE_ITEM_RECHECK_MS = 10_000;

/**
 * When `err` is a {@link StoreItemError}, reports it (one `error` line naming the project and the
 * key, and `agent_dispatch_store_item_errors_total{op}`) and answers true; else false. The
 * follow-up is neither sent nor ended for it: it waits until the key is repaired.
 */
export function reportItemError(
  ctx: Pick<RoleContext, 'logger' | 'metrics'>,
  err: unknown,
  ref: Pick<DispatchRef, 'dispatchId' | 'projectId'>,
): err is StoreItemError {
  if (!(err instanceof StoreItemError)) return false;
  ctx.metrics.storeItemErrors.inc({ op: err.op });
  ctx.logger.error(
    {
      projectId: ref.projectId,
      dispatchId: ref.dispatchId,
      op: err.op,
      key: err.key,
      why: err.why,
    },
    LIFECYCLE.storeItemError,
  );
  return true;
}
