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

  /** The project `followUps` would take past `PROJECT_BACKLOG_MAX`, read before REGISTER. */
  backlogOver(followUps: readonly Registration[]): Promise<BacklogOver | undefined> {
    return backlogOver(this.#state, followUps);
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
    multi.script('LOAD', LUA[scriptOf(this.#state)].source);
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

/** A project a batch would take past `PROJECT_BACKLOG_MAX`, as REGISTER refuses it. */
export interface BacklogOver {
  readonly projectId: string;
  readonly queued: number;
  readonly adding: number;
  readonly retryMs: number;
}

/**
 * REGISTER's backlog check (see includes/backlog.lua) read before the transaction, so that the
 * usual refusal adds no BullMQ job for a worker to end. It counts only the follow-ups without an
 * idempotency key, surely new (a keyed one may be a resend of one queued, which adds nothing):
 * it never refuses what REGISTER would take, and REGISTER's check is the one that holds.
 */
export async function backlogOver(
  state: StoreState,
  followUps: readonly Registration[],
): Promise<BacklogOver | undefined> {
  const backlog = state.options.backlog;
  if (!backlog) return undefined;
  const adding = new Map<string, number>();
  for (const { projectId, key } of followUps)
    if (key === undefined) adding.set(projectId, (adding.get(projectId) ?? 0) + 1);
  if (adding.size === 0) return undefined;
  const projects = [...adding.keys()];
  const { keys } = state;
  const counts = await state.redis.hmget(keys.openCounts, ...projects.map((p) => `q:${p}`));
  for (const [i, projectId] of projects.entries()) {
    const queued = Number(counts[i] ?? 0);
    const over = queued + (adding.get(projectId) ?? 0) - backlog.max;
    if (over <= 0) continue;
    const own = await state.redis.hmget(keys.projectControls(projectId), 'max', 'windowMs');
    const max = Number(own[0] ?? backlog.rate.max);
    const windowMs = Number(own[1] ?? backlog.rate.windowMs);
    const retryMs = Math.max(1_000, Math.ceil((over * windowMs) / max));
    return { projectId, queued, adding: adding.get(projectId) ?? 0, retryMs };
  }
  return undefined;
}

/** REGISTER, with its backlog check when `PROJECT_BACKLOG_MAX` is set. */
function scriptOf(state: StoreState): 'register' | 'registerBacklog' {
  return state.options.backlog ? 'registerBacklog' : 'register';
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
  state.scripts.queue(multi, scriptOf(state), [...keys, ...claimed], args);
}

/** How many of `followUps` each project has. */
function countByProject(followUps: readonly Registration[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { projectId } of followUps) counts[projectId] = (counts[projectId] ?? 0) + 1;
  return counts;
}
