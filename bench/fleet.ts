import { fileURLToPath } from 'node:url';
import { QUEUE_NAMES } from '../src/redis/keys.js';
import type { Simulator } from '../src/simulator/index.js';
import { logLines, runScript, type CliProcess, type RunOptions } from '../test/support/cli.js';
import { startRoles, waitForWorkers } from '../test/support/roles.js';
import { BENCH_API_KEY, type BenchContext, type Namespace } from './context.js';
import { BASELINE_QUEUE } from './workload.js';

/**
 * Child processes under test: our CLI roles (`node --import tsx src/cli.ts worker|poller`, from
 * the sources, so a run always measures the code as it is, with no build step) and the baseline's
 * minimal BullMQ workers. tsx compiles each module once at start-up; after that the process runs
 * plain JavaScript, so only start-up time and some resident memory differ from `dist/cli.js`.
 * Starting, waiting for and stopping processes are test/support's (`roles.ts`, `cli.ts`): the
 * bench runs the same helpers as the tests; stop processes with its `stopAll`.
 */

const BASELINE_SCRIPT = fileURLToPath(new URL('./baseline-worker.ts', import.meta.url));
/** Longer than the tests' default: the bench starts bigger fleets, each process compiling with tsx. */
const START_TIMEOUT_MS = 60_000;

/** How to start a process: with `profileDir`, V8 writes a CPU profile there when it exits. */
export interface StartOptions {
  readonly profileDir?: string;
}

/** Settings of every role the bench starts; scenarios override what they measure. */
export function roleEnv(
  ctx: BenchContext,
  ns: Namespace,
  simulator: Simulator,
  settings: Record<string, string> = {},
): Record<string, string> {
  return {
    REDIS_URL: ctx.redisUrl,
    DISPATCH_PREFIX: ns.prefix,
    EVENTS_STREAM: ns.eventsStream,
    AGENT_API_URL: simulator.url,
    AGENT_API_KEY: BENCH_API_KEY,
    SEND_RATE_LIMIT: '1000000/1s',
    WORKER_CONCURRENCY: '64',
    LOG_LEVEL: 'warn',
    SHUTDOWN_TIMEOUT: '5s',
    ...settings,
  };
}

/** Starts `count` processes of one of our roles and waits until their BullMQ workers are up. */
export async function launchRoles(
  ctx: BenchContext,
  ns: Namespace,
  command: 'worker' | 'poller',
  count: number,
  env: Record<string, string>,
  options: StartOptions = {},
): Promise<CliProcess[]> {
  const processes = startRoles(command, count, env, runOptions(options));
  const queue = command === 'worker' ? QUEUE_NAMES.dispatch : QUEUE_NAMES.poll;
  await waitForWorkers({ redis: ctx.admin, prefix: ns.prefix }, count, {
    queue,
    processes,
    timeoutMs: START_TIMEOUT_MS,
  });
  return processes;
}

/** Starts `count` baseline workers (concurrency `concurrency`) and waits until they are up. */
export async function startBaseline(
  ctx: BenchContext,
  ns: Namespace,
  simulator: Simulator,
  count: number,
  concurrency: number,
  options: StartOptions = {},
): Promise<CliProcess[]> {
  const env = {
    ...roleEnv(ctx, ns, simulator),
    WORKER_CONCURRENCY: String(concurrency),
    BASELINE_QUEUE,
  };
  const processes = Array.from({ length: count }, () =>
    runScript(BASELINE_SCRIPT, [], env, runOptions(options)),
  );
  await waitForWorkers({ redis: ctx.admin, prefix: ns.prefix }, count, {
    queue: BASELINE_QUEUE,
    processes,
    timeoutMs: START_TIMEOUT_MS,
  });
  return processes;
}

/**
 * The error-level log lines (pino level 50 and up) that processes wrote, which a scenario reports,
 * since a benchmark of a failing fleet would mean nothing. Read them after {@link stopAll}, which
 * rejects if a process did not exit 0, so that every line is complete.
 */
export function errorLines(processes: readonly CliProcess[]): string[] {
  return processes.flatMap((p) =>
    logLines(p.output.stdout)
      .filter((line) => Number(line['level']) >= 50)
      .map((line) => `${String(line['msg'])}: ${JSON.stringify(line['err'] ?? line)}`),
  );
}

/** With `profileDir`, V8 writes a CPU profile there when the process exits. */
function runOptions(options: StartOptions): RunOptions {
  const { profileDir } = options;
  return profileDir ? { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', profileDir] } : {};
}
