import { createHash } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { LUA } from '../src/store/lua.js';
import type { BenchContext } from './context.js';

/**
 * Where a run's Redis time goes, script by script: every command is logged with its duration
 * (`slowlog-log-slower-than 0`) while the run lasts, and the EVALSHA/EVAL entries are summed per
 * script, named from their SHA1 (ours from our sources, BullMQ's from the scripts it defines on a
 * connection). A script's duration includes the commands it runs, and SLOWLOG logs each of those
 * too (as client `?:0`, just before the script's own entry), inside the script's time: a script
 * that runs many commands reads high by their logging. Each script's commands are counted, so a
 * reader can weigh that. Logging every command costs Redis time itself, so a run timed this way
 * is not one whose CPU is reported.
 */

/** Time spent in one script over a run. */
export interface ScriptTime {
  readonly calls: number;
  readonly us: number;
  /** Commands the script ran, over all its calls (each logged inside its time). */
  readonly commands: number;
}

/** Script name → its calls and time; the scripts of both sides under one naming. */
export type ScriptTimes = ReadonlyMap<string, ScriptTime>;

/** Entries kept: far more than the commands of one run, so none is dropped. */
const LOG_LENGTH = 5_000_000;

/** The scripts of both sides: ours by their store name, BullMQ's as BullMQ names them. */
interface Known {
  readonly name: string;
  readonly source: string;
}

async function knownScripts(ctx: BenchContext): Promise<Known[]> {
  const known = Object.entries(LUA).map(([name, { source }]) => ({
    name: `ours: ${name}`,
    source,
  }));
  const queue = new Queue('script-names', { connection: ctx.connection, prefix: 'bench-names' });
  try {
    const client = (await queue.backend.client) as unknown as {
      scriptsSet: Record<string, { lua: string }>;
    };
    for (const [name, { lua }] of Object.entries(client.scriptsSet))
      known.push({ name: `BullMQ: ${name}`, source: lua });
  } finally {
    await queue.close();
  }
  return known;
}

/** SLOWLOG keeps the first 128 characters of an argument: an EVAL's script is told by those. */
const LOGGED_CHARS = 100;

/** The name of the script an EVALSHA (its SHA1) or EVAL (its logged source) ran. */
function namer(known: readonly Known[]): (command: string, script: string) => string {
  const sha1 = (source: string) => createHash('sha1').update(source).digest('hex');
  const bySha = new Map(known.map(({ name, source }) => [sha1(source), name]));
  const byStart = new Map(known.map(({ name, source }) => [source.slice(0, LOGGED_CHARS), name]));
  return (command, script) =>
    (command === 'evalsha' ? bySha.get(script) : byStart.get(script.slice(0, LOGGED_CHARS))) ??
    `unknown script ${script.slice(0, 8)}`;
}

/** What a timed run gave: each script's time, how many entries were logged, and `work`'s result. */
export interface TimedRun<T> {
  readonly times: ScriptTimes;
  readonly logged: number;
  readonly result: T;
}

/** The client SLOWLOG names for a command a script ran. */
const SCRIPT_CLIENT = '?:0';

/** Runs `work` with every command logged; returns the time of each script it ran. */
export async function timeScripts<T>(
  ctx: BenchContext,
  work: () => Promise<T>,
): Promise<TimedRun<T>> {
  const nameOf = namer(await knownScripts(ctx));
  const admin: Redis = ctx.admin;
  const [, before] = (await admin.config('GET', 'slowlog-log-slower-than')) as [string, string];
  const [, length] = (await admin.config('GET', 'slowlog-max-len')) as [string, string];
  await admin.config('SET', 'slowlog-max-len', String(LOG_LENGTH));
  await admin.slowlog('RESET');
  await admin.config('SET', 'slowlog-log-slower-than', '0');
  let entries: [number, number, number, string[], string?][];
  let result: T;
  try {
    result = await work();
  } finally {
    await admin.config('SET', 'slowlog-log-slower-than', before);
    entries = (await admin.call('SLOWLOG', 'GET', '-1')) as typeof entries;
    await admin.slowlog('RESET');
    await admin.config('SET', 'slowlog-max-len', length);
  }
  const times = new Map<string, { calls: number; us: number; commands: number }>();
  // Oldest first: a script's commands are logged before the script itself.
  let ran = 0;
  for (const [, , us, args, client] of entries.reverse()) {
    const command = String(args[0]).toLowerCase();
    if (client === SCRIPT_CLIENT) ran += 1;
    if (command !== 'evalsha' && command !== 'eval') continue;
    const name = nameOf(command, String(args[1]));
    const time = times.get(name) ?? { calls: 0, us: 0, commands: 0 };
    time.calls += 1;
    time.us += us;
    time.commands += ran;
    ran = 0;
    times.set(name, time);
  }
  return { times, logged: entries.length, result };
}
