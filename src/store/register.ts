import { randomUUID } from 'node:crypto';
import type { ChainableCommander } from 'ioredis';
import { deadlineArgument } from '../dispatch/deadline.js';
import { contentDigest } from '../dispatch/digest.js';
import type { FollowUp } from '../dispatch/followup.js';
import { LUA } from './lua.js';
import { laneOf, type StoreState } from './store-state.js';

/**
 * A follow-up to register, with the trace context of the producer's span when traced, and the
 * token of its key's claim across shards when it has one (`Claims`).
 */
export type Registration = FollowUp & {
  readonly traceparent?: string | undefined;
  readonly claimToken?: string | undefined;
};

/**
 * Follow-ups per REGISTER call. A batch has no size limit of its own (`sendMany`): one call for
 * all of it would be one command as large as all its prompts (Redis holds a command whole in the
 * client's query buffer, at most 1 GB) with four keys and nine arguments per follow-up.
 */
export const REGISTER_CHUNK = 1_000;

/**
 * REGISTER, the store's one write of the producer, queued inside the producer's MULTI (see
 * register-n.lua). Reached as `DispatchStore.register`.
 */
export class Register {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /**
   * Queues REGISTER of every follow-up of a batch (its dispatch id at the same index), in order, on
   * `multi`, a MULTI of the store's connection, after a SCRIPT LOAD of REGISTER at its start, so
   * that the script is there when it runs (NOSCRIPT inside MULTI fails one command and commits the
   * rest). One REGISTER call per {@link REGISTER_CHUNK} follow-ups, whose replies are their
   * answers, in the same order. Returns how many replies the loads and the calls add, in that
   * order. Only a follow-up with an idempotency key gets a digest: without one, its id is random
   * and never registered again, so nothing would ever compare it.
   */
  into(
    multi: ChainableCommander,
    dispatchIds: readonly string[],
    followUps: readonly Registration[],
  ): { loads: number; registers: number } {
    multi.script('LOAD', LUA.register.source);
    let registers = 0;
    // Only a batch of several calls needs the marker by which a refusal reaches the later calls.
    const marker = followUps.length > REGISTER_CHUNK ? `backlog:${randomUUID()}` : '';
    for (let first = 0; first < followUps.length; first += REGISTER_CHUNK, registers++) {
      const last = Math.min(first + REGISTER_CHUNK, followUps.length);
      const batch = { marker, later: followUps.slice(last) };
      queueChunk(
        this.#state,
        multi,
        dispatchIds.slice(first, last),
        followUps.slice(first, last),
        batch,
      );
    }
    return { loads: 1, registers };
  }
}

/** Queues one REGISTER call of `followUps`. */
function queueChunk(
  state: StoreState,
  multi: ChainableCommander,
  dispatchIds: readonly string[],
  followUps: readonly Registration[],
  batch: { readonly marker: string; readonly later: readonly Registration[] },
): void {
  const { keys: at } = state;
  const backlog = state.options.backlog;
  const keys: string[] = [at.open, at.laneProjects];
  // A record's key holds its dispatch id, so the id is not sent again.
  const args: string[] = [
    at.dispatch(''),
    at.laneHeadsPrefix,
    String(followUps.length),
    String(state.options.retentionMs),
    String(backlog?.max ?? 0),
    String(backlog?.rate.max ?? 1),
    String(backlog?.rate.windowMs ?? 1),
    backlog && batch.later.length > 0 ? JSON.stringify(countByProject(batch.later)) : '',
    batch.marker,
  ];
  // Only a follow-up with a claim token has these two keys, after all the others.
  const claimed: string[] = [];
  for (const [i, followUp] of followUps.entries()) {
    const dispatchId = dispatchIds[i] as string;
    keys.push(at.dispatch(dispatchId), ...laneOf(state, followUp), at.prompt(dispatchId));
    if (followUp.claimToken) claimed.push(at.claimReleased(dispatchId), at.orphan(dispatchId));
    args.push(
      followUp.projectId,
      followUp.jobId,
      followUp.prompt,
      followUp.key ?? '',
      followUp.meta ? JSON.stringify(followUp.meta) : '',
      followUp.key === undefined ? '' : contentDigest(followUp),
      followUp.traceparent ?? '',
      followUp.claimToken ?? '',
      deadlineArgument(followUp),
    );
  }
  state.scripts.queue(multi, 'register', [...keys, ...claimed], args);
}

/** How many of `followUps` each project has. */
function countByProject(followUps: readonly Registration[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { projectId } of followUps) counts[projectId] = (counts[projectId] ?? 0) + 1;
  return counts;
}
