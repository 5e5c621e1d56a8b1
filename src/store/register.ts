import { hash, randomInt, randomUUID } from 'node:crypto';
import type { JobJson, JobsOptions } from 'bullmq';
import type { ChainableCommander } from 'ioredis';
import { deadlineArgument } from '../dispatch/deadline.js';
import type { Dispatchable } from '../dispatch/creation.js';
import { backlogOver, type BacklogOver } from './backlog.js';
import { LUA } from './lua.js';
import { laneOf, type DispatchRef, type StoreState } from './store-state.js';

/**
 * A follow-up to register, with the trace context of the producer's span when traced, the token
 * of its key's claim across shards when it has one (`Claims`), and the digest of the batch's
 * creation it is chained to (REGISTER refuses it, -3, when that creation's record holds another).
 */
export type Registration = Dispatchable & {
  readonly traceparent?: string | undefined;
  readonly claimToken?: string | undefined;
  readonly afterDigest?: string | undefined;
};

/**
 * Follow-ups per REGISTER call. A batch has no size limit (`sendMany`): one call would be one
 * command as large as all its prompts (Redis holds a command whole, at most 1 GB).
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
   * Queues REGISTER of a batch (dispatch ids at the same index), in order, on `multi` (a MULTI),
   * after a SCRIPT LOAD of REGISTER (NOSCRIPT inside MULTI would fail one command and commit the
   * rest). One call per {@link REGISTER_CHUNK} follow-ups, its replies their answers in order.
   * Returns how many replies the loads and the calls add. Only a keyed follow-up gets a digest:
   * an unkeyed one's id is random, never registered again, so nothing would compare it.
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
      followUp.kind === 'create' ? 'c' : followUp.after ? afterArgument(followUp) : '',
    );
  }
  state.scripts.queue(multi, scriptOf(state), [...keys, ...claimed], args);
}

// A chained follow-up's kind: `a<creation's dispatch id> <its digest, if of the batch>`.
const afterArgument = (f: Registration) => `a${f.after ?? ''} ${f.afterDigest ?? ''}`;

/** How many of `followUps` each project has. */
function countByProject(followUps: readonly Registration[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { projectId } of followUps) counts[projectId] = (counts[projectId] ?? 0) + 1;
  return counts;
}

/**
 * The digest of a follow-up's content (project, job, prompt, meta with its keys sorted), stored on
 * its record: a send with the same idempotency key and another digest is a conflict.
 */
export function contentDigest(followUp: Dispatchable): string {
  const content = [
    JSON.stringify(followUp.projectId),
    JSON.stringify(followUp.jobId),
    JSON.stringify(followUp.prompt),
    followUp.meta === undefined ? 'null' : canonicalJson(followUp.meta),
  ].join(',');
  return hash('sha256', content);
}

/** JSON with object keys sorted. Recursive: only for validated meta, at most 32 levels deep. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** What a dispatch's BullMQ job holds as its `data` (read back by the worker, `readDispatchJob`). */
export interface DispatchJobData {
  p: string;
  j: string;
  d?: string | undefined;
  t?: string | undefined;
}

/** What a worker reads from a dispatch's BullMQ job: which dispatch, and its trace context. */
export interface DispatchJobRef extends DispatchRef {
  readonly traceparent?: string | undefined;
}

/** The payload of the BullMQ job `bullJobId` that carries dispatch `ref`. */
export function dispatchJobPayload(ref: DispatchJobRef, bullJobId: string): DispatchJobData {
  const data: DispatchJobData = { p: ref.projectId, j: ref.jobId };
  if (bullJobId !== ref.dispatchId) data.d = ref.dispatchId;
  if (ref.traceparent) data.t = ref.traceparent;
  return data;
}

/** BullMQ job name of a dispatch (shown on the dashboard). */
export const DISPATCH_JOB_NAME = 'followup';

/**
 * Retries of transient failures (5xx, not connected) wait `base × 2^(n-1)` ms; 429s and budget
 * waits park the job without spending an attempt. `base` is drawn per job from 500 to 1,000 ms:
 * a fleet's retries after an outage spread over the same range as with BullMQ's `jitter: 0.5`,
 * and the options stay within 64 bytes (see the payload above), which `jitter` would not.
 */
function backoffBaseMs(): number {
  return 500 + Math.floor(Math.random() * 501);
}

/**
 * The job options of one dispatch. Its id, the dispatch id (so adding it twice is a no-op), is
 * not among them: the producer hands it to BullMQ beside them, so that it is not stored again in
 * every job's options; `queue.add` takes it among them (`addDispatchJob`).
 */
export function dispatchJobOptions(attempts: number, baseMs = backoffBaseMs()): JobsOptions {
  return { attempts, backoff: { type: 'exponential', delay: baseMs } };
}

/**
 * The BullMQ job of a dispatch as BullMQ's `addJobToTransaction` takes it: what `asJSON()` of a
 * new `Job` with these options answers (test/producer/job-json.redis.test.ts compares them),
 * built directly: a `Job` instance per follow-up would cost the producer more than the add.
 */
export function dispatchJobJson(
  ref: DispatchJobRef,
  opts: JobsOptions,
  timestamp = Date.now(),
): JobJson {
  return {
    id: ref.dispatchId,
    name: DISPATCH_JOB_NAME,
    data: JSON.stringify(dispatchJobPayload(ref, ref.dispatchId)),
    opts,
    progress: 0,
    attemptsMade: 0,
    attemptsStarted: 0,
    stalledCounter: 0,
    timestamp,
    stacktrace: 'null',
    returnvalue: 'null',
    // `failedReason` too is left out, as `asJSON()` leaves it out of a job that never failed.
  } as JobJson;
}

/**
 * A new dispatch id. With an idempotency key it is derived from the key, so every producer that
 * sends the same key lands on the same record and the same BullMQ job id, even across a retry
 * after an error whose outcome the producer never saw. Without one it is random (see
 * {@link randomDispatchId}).
 */
export function newDispatchId(key: string | undefined): string {
  if (key === undefined) return randomDispatchId();
  return `k-${hash('sha256', key).slice(0, 40)}`;
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const ID_LETTERS = 52;
const RANDOM_ID_CHARS = 22;

/**
 * A random dispatch id: 22 letters and digits, the first a letter (about 130 random bits), never
 * read as a number (BullMQ refuses a job id that is one) nor as an option on a command line.
 * Shorter than a UUID: the id is in the keys of its record, prompt and job, and in its lane.
 */
export function randomDispatchId(): string {
  // randomInt draws without bias, from a pool of random bytes Node keeps.
  let id = ID_ALPHABET[randomInt(ID_LETTERS)] as string;
  while (id.length < RANDOM_ID_CHARS) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)] as string;
  return id;
}
