import type { Queue } from 'bullmq';
import type { AgentApiClient } from '../agent-api/index.js';
import type { Config } from '../config/index.js';
import type { DispatchStore } from '../store/store.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { within } from '../time/deadline.js';

/**
 * What the roles share to run: the one role type, what a role's work is handed, the one
 * deadline-bounded shutdown. How a role ends a dispatch is the store's (`store/finish.ts`).
 */

/** A started role (worker, poller, an HTTP server), as the CLI and `/readyz` see it. */
export interface Role {
  readonly name: string;
  running(): boolean;
  /** Stops gracefully within the shutdown deadline; idempotent (the same promise). */
  close(): Promise<void>;
}

/** What a role needs to start; `api` may be given (tests), otherwise it is built from `config`. */
export interface RoleOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly api?: AgentApiClient;
}

/** What a worker's or poller's work is handed, built once per process (see `openRoleResources`). */
export interface RoleContext {
  readonly config: Config;
  readonly store: DispatchStore;
  readonly api: AgentApiClient;
  /** The dispatch queue: to wake a lane's next dispatch and to add resends. */
  readonly queue: Queue;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /**
   * Reads `AGENT_API_KEY_FILE` again now (it is also re-read on SIGHUP and when it changes) and
   * returns whether the key changed. Always false without a key file.
   */
  readonly refreshKey: () => boolean;
}

/** What a role's shutdown stops: its BullMQ Worker within the deadline, then the rest in order. */
export interface RoleParts {
  readonly name: string;
  readonly config: Config;
  readonly logger: Logger;
  readonly worker: { isRunning(): boolean; close(force?: boolean): Promise<void> };
  /** A start-up step that must be over before the worker closes. */
  readonly starting?: Promise<unknown>;
  /** Run after the worker closed, in order, each even if one before it failed. */
  readonly after: readonly (() => Promise<void>)[];
}

/** The {@link Role} of a started worker or poller: `close` is its one shutdown. */
export function roleOf(parts: RoleParts): Role {
  let closing: Promise<void> | undefined;
  return {
    name: parts.name,
    running: () => !closing && parts.worker.isRunning(),
    close() {
      closing ??= shutdown(parts);
      return closing;
    },
  };
}

/**
 * What a role's shutdown takes beyond `SHUTDOWN_TIMEOUT`: a forced close of its BullMQ Worker,
 * then its closing steps (queues, connections) in all. What outlasts them is abandoned: the
 * process is about to exit, and a role in a test or in `start` lets it finish on its own.
 */
const FORCE_CLOSE_MS = 1_000;
const CLOSE_STEPS_MS = 2_000;

async function shutdown({
  name,
  config,
  logger,
  worker,
  starting,
  after,
}: RoleParts): Promise<void> {
  logger.info({ deadlineMs: config.shutdownTimeoutMs }, LIFECYCLE.roleStopping);
  const deadline = Date.now() + config.shutdownTimeoutMs;
  // A start-up step waits for Redis; one that is down cannot hold the shutdown past its deadline.
  await within(
    Promise.resolve(starting).then(() => undefined),
    config.shutdownTimeoutMs,
    () => undefined,
  ).catch(() => undefined);
  const timedOut = await closeWorkerWithin(worker, Math.max(0, deadline - Date.now()));
  await closeInOrder(
    logger,
    CLOSE_STEPS_MS,
    after.map((step, i) => [`${name} step ${i + 1}`, step] as const),
  );
  logger.info({ timedOut }, LIFECYCLE.roleStopped);
}

/**
 * Closes a BullMQ Worker, waiting for its active jobs at most `deadlineMs`, then forcing it.
 * Resolves to whether the deadline was hit. Jobs abandoned that way stall, and their reruns read
 * the dispatch record first, so nothing is lost or sent twice. BullMQ's `close(true)` after a
 * `close()` still waiting returns that same wait (a job that never ends would hold it for ever),
 * so the forced close is bounded too.
 */
async function closeWorkerWithin(
  worker: { close(force?: boolean): Promise<void> },
  deadlineMs: number,
): Promise<boolean> {
  const timedOut = await within(
    worker.close().then(() => false),
    deadlineMs,
    () => true,
  ).catch(() => true);
  if (timedOut) {
    await within(
      worker.close(true).catch(() => {}),
      FORCE_CLOSE_MS,
      () => {},
    );
  }
  return timedOut;
}

/**
 * Runs ordered shutdown steps: each runs even if one before it failed (logged), and the whole is
 * bounded by `deadlineMs`, after which what is left is abandoned (the process is about to exit).
 */
export async function closeInOrder(
  logger: Logger,
  deadlineMs: number,
  steps: readonly (readonly [name: string, step: () => Promise<unknown>])[],
): Promise<void> {
  const all = (async () => {
    for (const [name, step] of steps) {
      await step().catch((err: unknown) =>
        logger.warn({ err, step: name }, LIFECYCLE.shutdownStepFailed),
      );
    }
  })();
  await within(all, deadlineMs, () => logger.warn({ deadlineMs }, LIFECYCLE.shutdownDeadline));
}
