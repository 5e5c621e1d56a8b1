import type { Writable } from 'node:stream';
import type { SettingName } from '../config/index.js';
import { UsageError } from './errors.js';
export { UsageError } from './errors.js';

/** One command-line option of a command. `setting` makes the flag override that setting. */
export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly description: string;
  readonly short?: string;
  readonly multiple?: boolean;
  readonly setting?: SettingName;
  readonly placeholder?: string;
}

/** What a command receives: parsed flags, positionals, the environment and the output streams. */
export interface CommandContext {
  readonly values: Readonly<Record<string, string | boolean | string[] | undefined>>;
  readonly positionals: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: Writable;
  readonly stderr: Writable;
  /** Aborted on the first SIGTERM/SIGINT: long-running commands stop gracefully when it fires. */
  readonly signal: AbortSignal;
}

/** One `agent-dispatch <name>` command. `run` resolves to the process exit code. */
export interface Command {
  readonly name: string;
  readonly summary: string;
  /** Usage line after `agent-dispatch`, for `--help`. */
  readonly usage: string;
  /** Extra paragraphs for `--help`: examples, settings read. */
  readonly details?: string;
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** Settings the command refuses to start without. */
  readonly requires?: readonly SettingName[];
  run(ctx: CommandContext): Promise<number>;
}

/** Exit codes: 0 ok, 1 the work failed, 2 bad usage or a bad setting (contract, section 2). */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** The one DISPATCH_ID of `command`'s positionals; anything else is a {@link UsageError}. */
export function oneDispatchId(command: string, ctx: CommandContext): string {
  const [dispatchId, ...extra] = ctx.positionals;
  if (!dispatchId || extra.length > 0)
    throw new UsageError(`${command} takes exactly one DISPATCH_ID`);
  return dispatchId;
}
