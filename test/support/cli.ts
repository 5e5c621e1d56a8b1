import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const TSX = import.meta.resolve('tsx');

/** A CLI process of the service (`agent-dispatch <command>`), run from the TypeScript sources. */
export interface CliProcess {
  readonly child: ChildProcess;
  /** Everything it wrote, by stream, so far. */
  readonly output: { stdout: string; stderr: string };
  /** Resolves with the exit code (or the signal's name) when it exits. */
  readonly exited: Promise<number | string>;
  /** Sends `signal` and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/** How to start a process: `nodeArgs` go to Node itself (e.g. `--cpu-prof`), before `--import tsx`. */
export interface RunOptions {
  readonly nodeArgs?: readonly string[];
  /** @defaultValue the repository's root */
  readonly cwd?: string;
}

/** Starts `agent-dispatch ...args` with `env` (on top of PATH and HOME only). */
export function runCli(
  args: readonly string[],
  env: Record<string, string>,
  options: RunOptions = {},
): CliProcess {
  return runScript(CLI, args, env, options);
}

/**
 * Starts the TypeScript file `script` with `args` in its own Node process, the way {@link runCli}
 * starts the service (the bench runs its baseline worker with it): `env` on top of PATH and HOME.
 */
export function runScript(
  script: string,
  args: readonly string[],
  env: Record<string, string>,
  options: RunOptions = {},
): CliProcess {
  const nodeArgs = options.nodeArgs ?? [];
  // tsx resolved here, so that a process started in another folder finds it too.
  return runProgram(
    process.execPath,
    [...nodeArgs, '--import', TSX, script, ...args],
    env,
    options,
  );
}

/**
 * Starts any program (`python3` running an example, say) the way {@link runScript} starts a
 * TypeScript file: `env` on top of PATH and HOME, output collected.
 */
export function runProgram(
  program: string,
  args: readonly string[],
  env: Record<string, string>,
  options: Pick<RunOptions, 'cwd'> = {},
): CliProcess {
  const child = spawn(program, args, {
    cwd: options.cwd ?? ROOT,
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

/** Runs a CLI command to its end; resolves with its exit code and output. */
export async function runCliToEnd(
  args: readonly string[],
  env: Record<string, string>,
  options: RunOptions = {},
): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const proc = runCli(args, env, options);
  const code = await proc.exited;
  return { code, ...proc.output };
}

/** The JSON log lines a process wrote to stdout, parsed. */
export function logLines(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}
