import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { QUEUE_NAMES } from '../src/redis/keys.js';
import type { Simulator } from '../src/simulator/index.js';
import { logLines, runCli, type CliProcess } from '../test/support/cli.js';
import { BENCH_API_KEY, type BenchContext, type Namespace } from './context.js';
import { BASELINE_QUEUE } from './workload.js';

/**
 * Child processes under test: our CLI roles (`node --import tsx src/cli.ts worker|poller`, from
 * the sources, so a run always measures the code as it is, with no build step) and the baseline's
 * minimal BullMQ workers. tsx compiles each module once at start-up; after that the process runs
 * plain JavaScript, so only start-up time and some resident memory differ from `dist/cli.js`.
 */

const BASELINE_SCRIPT = fileURLToPath(new URL('./baseline-worker.ts', import.meta.url));
const CLI = fileURLToPath(new URL('../src/cli.ts', import.meta.url));

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
export async function startRoles(
  ctx: BenchContext,
  ns: Namespace,
  command: 'worker' | 'poller',
  count: number,
  env: Record<string, string>,
  options: StartOptions = {},
): Promise<CliProcess[]> {
  const processes = Array.from({ length: count }, () =>
    options.profileDir ? spawnNode([CLI, command], env, options) : runCli([command], env),
  );
  const queue = command === 'worker' ? QUEUE_NAMES.dispatch : QUEUE_NAMES.poll;
  await waitForWorkers(ctx, ns, queue, count, processes);
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
  const processes = Array.from({ length: count }, () => spawnNode([BASELINE_SCRIPT], env, options));
  await waitForWorkers(ctx, ns, BASELINE_QUEUE, count, processes);
  return processes;
}

/**
 * Stops processes gracefully; resolves to the error-level log lines they wrote (pino level 50 and
 * up), which a scenario reports, since a benchmark of a failing fleet would mean nothing.
 */
export async function stopAll(processes: readonly CliProcess[]): Promise<string[]> {
  await Promise.all(processes.map((p) => p.stop('SIGTERM')));
  return processes.flatMap((p) =>
    logLines(p.output.stdout)
      .filter((line) => Number(line['level']) >= 50)
      .map((line) => `${String(line['msg'])}: ${JSON.stringify(line['err'] ?? line)}`),
  );
}

async function waitForWorkers(
  ctx: BenchContext,
  ns: Namespace,
  queueName: string,
  count: number,
  processes: readonly CliProcess[],
): Promise<void> {
  const queue = new Queue(queueName, { connection: ctx.connection, prefix: ns.prefix });
  try {
    const deadline = Date.now() + 60_000;
    while ((await queue.getWorkersCount()) < count) {
      const dead = processes.find((p) => p.child.exitCode !== null);
      if (dead) throw new Error(`a ${queueName} process exited: ${dead.output.stderr.slice(-500)}`);
      if (Date.now() > deadline) throw new Error(`${count} ${queueName} workers did not start`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await queue.close();
  }
}

/** Runs a TypeScript file (and its arguments) in its own Node process, like {@link runCli}. */
function spawnNode(
  args: readonly string[],
  env: Record<string, string>,
  options: StartOptions,
): CliProcess {
  const profile = options.profileDir ? ['--cpu-prof', '--cpu-prof-dir', options.profileDir] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', ...args], {
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout?.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1));
  });
  return {
    child,
    output,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
