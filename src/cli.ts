#!/usr/bin/env node
/**
 * The composition root: parses the command line, turns setting and usage problems into exit code
 * 2, wires signals to a graceful stop, and runs one command.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { EXIT, UsageError, type Command, type CommandContext } from './cli/command.js';
import { COMMANDS } from './cli/commands.js';
import { commandHelp, topLevelHelp } from './cli/help.js';
import { ConfigError } from './config/index.js';
import { DEMO_DATA_DIR, runningEmbeddedRedisUrl } from './cli/embedded-folder.js';
import { LayoutError } from './redis/layout.js';
import { InvalidFollowUpError } from './dispatch/followup-problems.js';
import { stopTracing } from './telemetry/tracing-sdk.js';
import { InvalidControlError } from './producer/index.js';

/** Runs the CLI with `argv` (without node and script); resolves to the exit code. */
export async function main(argv: readonly string[], signal: AbortSignal): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${topLevelHelp(COMMANDS)}\n`);
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    process.stderr.write(`agent-dispatch: unknown command "${name}"; run agent-dispatch --help\n`);
    return EXIT.usage;
  }
  try {
    const parsed = parse(command, rest);
    if (parsed.values['help'] === true) {
      process.stdout.write(`${commandHelp(command)}\n`);
      return EXIT.ok;
    }
    const ctx: CommandContext = {
      values: parsed.values as CommandContext['values'],
      positionals: parsed.positionals,
      env: withDemoRedis(command, process.env),
      stdout: process.stdout,
      stderr: process.stderr,
      signal,
    };
    return await command.run(ctx);
  } catch (err) {
    return report(err);
  } finally {
    // The last spans go out before the exit (bounded: a collector that is down cannot hold it).
    await stopTracing();
  }
}

/**
 * Without REDIS_URL, the commands other than `start` and `simulate`, run in the folder where the
 * demo of `start` runs, use the demo's private Redis (its data folder names it) and say so.
 */
function withDemoRedis(command: Command, env: NodeJS.ProcessEnv): CommandContext['env'] {
  if (env['REDIS_URL'] || env['REDIS_SENTINELS'] || NO_REDIS.has(command.name)) return env;
  const url = runningEmbeddedRedisUrl(DEMO_DATA_DIR);
  if (!url) return env;
  process.stderr.write(`agent-dispatch: REDIS_URL is not set: using the demo's Redis at ${url}\n`);
  return { ...env, REDIS_URL: url };
}

/** Commands that never use the demo's Redis: start runs its own, simulate needs none. */
const NO_REDIS = new Set(['start', 'simulate']);

function parse(command: Command, args: readonly string[]) {
  const options: ParseArgsConfig['options'] = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(command.options)) {
    options[name] = {
      type: o.type,
      ...(o.short ? { short: o.short } : {}),
      ...(o.multiple ? { multiple: true } : {}),
    };
  }
  try {
    return parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${usageProblem(err)}; run agent-dispatch ${command.name} --help`);
  }
}

/** Node's parser explains its errors at length; a user needs the option and what is wrong. */
function usageProblem(err: unknown): string {
  const { code, message } = err as { code?: string; message: string };
  const option = /'(-{1,2}[^' ]+)/.exec(message)?.[1];
  if (!option) return message;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option ${option}`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') return `option ${option} needs a value`;
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') return `unexpected argument ${option}`;
  return message;
}

/** Prints an error as the contract wants it and picks the exit code. No stack trace for users. */
function report(err: unknown): number {
  const write = (line: string) => process.stderr.write(`agent-dispatch: ${line}\n`);
  if (err instanceof ConfigError) {
    for (const p of err.problems) write(`${p.setting}: ${p.message}`);
    return EXIT.usage;
  }
  if (err instanceof UsageError || err instanceof LayoutError) {
    write(err.message);
    return EXIT.usage;
  }
  if (err instanceof InvalidControlError) {
    write(`${err.field}: ${err.problem}`);
    return EXIT.usage;
  }
  if (err instanceof InvalidFollowUpError) {
    for (const p of err.problems) write(`${p.field}: ${p.message}`);
    return EXIT.usage;
  }
  const code =
    typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
  write(`${err instanceof Error ? err.message : String(err)}${code ? ` (${code})` : ''}`);
  return EXIT.failed;
}

const controller = new AbortController();
// SIGHUP re-reads AGENT_API_KEY_FILE where a role has one (config/key-file.ts); it never ends a
// process, as Node's default would (`docker compose kill -s HUP` sends it to a whole fleet).
process.on('SIGHUP', () => {});
// Output nobody reads any more (a closed pipe: `... | head`) must not keep a role from stopping:
// a failed write is dropped, not thrown from inside the shutdown.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
let signals = 0;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    // The first signal stops gracefully; a second one forces the exit at once.
    if (++signals > 1) process.exit(130);
    controller.abort();
  });
}

main(process.argv.slice(2), controller.signal).then(
  (code) => {
    process.exitCode = code;
    // Everything is closed by now; a handle left open by a library must not keep us alive.
    setTimeout(() => process.exit(code), 3_000).unref();
  },
  (err: unknown) => {
    process.stderr.write(`agent-dispatch: ${String(err)}\n`);
    process.exit(EXIT.failed);
  },
);
