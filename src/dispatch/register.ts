import type { ChainableCommander } from 'ioredis';
import { contentDigest } from './digest.js';
import type { FollowUp } from './followup.js';
import { laneOf, type StoreState } from './store-state.js';

/** A follow-up to register, with the trace context of the producer's span when traced. */
export type Registration = FollowUp & { readonly traceparent?: string | undefined };

/**
 * Queues one REGISTER of every follow-up of a batch (its dispatch id at the same index), in
 * order, on `multi`, a MULTI of the store's connection (see register-n.lua): its reply is their
 * answers, in the same order. Only a follow-up with an idempotency key gets a digest: without
 * one, its id is random and never registered again, so nothing would ever compare it.
 */
export function queueRegister(
  state: StoreState,
  multi: ChainableCommander,
  dispatchIds: readonly string[],
  followUps: readonly Registration[],
): void {
  const { keys: at } = state;
  const keys: string[] = [at.open];
  // A record's key holds its dispatch id, so the id is not sent again.
  const args: string[] = [at.dispatch('')];
  for (const [i, followUp] of followUps.entries()) {
    const dispatchId = dispatchIds[i] as string;
    keys.push(at.dispatch(dispatchId), laneOf(state, followUp), at.prompt(dispatchId));
    args.push(
      followUp.projectId,
      followUp.jobId,
      followUp.prompt,
      followUp.key ?? '',
      followUp.meta ? JSON.stringify(followUp.meta) : '',
      followUp.key === undefined ? '' : contentDigest(followUp),
      followUp.traceparent ?? '',
    );
  }
  state.scripts.queue(multi, 'register', keys, args);
}
