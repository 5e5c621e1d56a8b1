import { basename } from 'node:path';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { runCli, type CliProcess, type RunOptions } from './cli.js';

/**
 * Role processes (`agent-dispatch worker|poller`) of a fleet: start them, wait until their BullMQ
 * workers are connected, stop them and check how each one ended. Shared by the tests, the fault
 * suite and the bench; it imports nothing from Vitest, so the bench (a plain Node script) can too.
 */

/** Where a fleet's queues live: a Redis client to copy the connection of, and the key prefix. */
export interface QueueHome {
  readonly redis: Redis;
  readonly prefix: string;
}

/** Starts `count` processes of `command` (worker or poller); see {@link waitForWorkers}. */
export function startRoles(
  command: 'worker' | 'poller',
  count: number,
  env: Record<string, string>,
  options: RunOptions = {},
): CliProcess[] {
  return Array.from({ length: count }, () => runCli([command], env, options));
}

/** What {@link waitForWorkers} waits on. */
export interface WaitOptions {
  /** The queue whose BullMQ workers to count: `poll` for pollers. @defaultValue the dispatch queue */
  readonly queue?: string;
  /** The processes meant to be those workers: if one exits, the wait fails at once. */
  readonly processes?: readonly CliProcess[];
  /** @defaultValue 30000 */
  readonly timeoutMs?: number;
}

/** Waits until `count` BullMQ workers are connected to a queue of `home` (their processes are up). */
export async function waitForWorkers(
  home: QueueHome,
  count: number,
  options: WaitOptions = {},
): Promise<void> {
  const { queue: name = QUEUE_NAMES.dispatch, processes = [], timeoutMs = 30_000 } = options;
  const connection = home.redis.duplicate();
  const queue = new Queue(name, { connection, prefix: home.prefix });
  try {
    const deadline = Date.now() + timeoutMs;
    while ((await queue.getWorkersCount()) < count) {
      const dead = processes.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
      if (dead) {
        const code = dead.child.exitCode ?? dead.child.signalCode ?? -1;
        throw new Error(`before ${count} ${name} workers were up, ${describeExit(dead, code)}`);
      }
      if (Date.now() > deadline)
        throw new Error(`${count} ${name} workers did not start within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

/**
 * Sends SIGTERM to every process and waits for all of them; resolves with each one's exit code or
 * signal name, in order. Never rejects: for a caller that reports the codes before it asserts on
 * them with {@link uncleanExits}. Everyone else calls {@link stopAll}.
 */
export function terminate(processes: readonly CliProcess[]): Promise<(number | string)[]> {
  return Promise.all(processes.map((p) => p.stop('SIGTERM')));
}

/**
 * One line for each process that did not exit 0 (a non-zero code, or a signal: SIGTERM not
 * handled, a kill), with the end of its stderr; empty when every one exited 0. `exits` are what
 * {@link terminate} resolved with for `processes`.
 */
export function uncleanExits(
  processes: readonly CliProcess[],
  exits: readonly (number | string)[],
): string[] {
  return processes.flatMap((p, i) => {
    const code = exits[i];
    return code === 0 ? [] : [describeExit(p, code ?? 'no exit')];
  });
}

/**
 * Stops processes gracefully (SIGTERM) and rejects unless each one exited 0: a role that exits
 * non-zero or by a signal after SIGTERM, or had already died, did not shut down as it should.
 */
export async function stopAll(processes: readonly CliProcess[]): Promise<void> {
  const unclean = uncleanExits(processes, await terminate(processes));
  if (unclean.length > 0) {
    throw new Error(
      `${unclean.length} of ${processes.length} processes did not exit 0 on SIGTERM:\n` +
        unclean.join('\n'),
    );
  }
}

/** "cli.ts worker (pid 12) exited 2: <the end of its stderr>"; a signal reads "ended by SIGKILL". */
function describeExit(p: CliProcess, code: number | string): string {
  const args = p.child.spawnargs;
  // What follows `--import <tsx>`: the script and its arguments.
  const command = args.slice(args.indexOf('--import') + 2);
  const name = [basename(command[0] ?? '?'), ...command.slice(1)].join(' ');
  const how = typeof code === 'number' ? `exited ${code}` : `ended by ${code}`;
  const stderr = p.output.stderr.trim().slice(-500);
  return `${name} (pid ${p.child.pid ?? '?'}) ${how}${stderr ? `: ${stderr}` : ''}`;
}
