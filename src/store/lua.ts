import { readFileSync } from 'node:fs';
import type { ChainableCommander, Redis } from 'ioredis';

/**
 * The Lua scripts behind every multi-key change of a dispatch, one `.lua` file each beside
 * this one (named with its key count, as BullMQ names its own; `n`: it varies, and each call passes
 * it), read once at module load. Each
 * runs atomically, so a state change and what must go with it (a budget entry, a lane release,
 * the stream entry) happen together or not at all. Times come from Redis (`TIME`), one clock for
 * the whole fleet; MARK_SENT and RESCHEDULE, which need a time only to schedule a status read,
 * are handed it by the store from that clock (`RedisClock`). Every key a script touches is passed in KEYS, so a `{hash-tag}` prefix keeps
 * them in one slot.
 *
 * A line `--- @include "includes/<name>"` is replaced by that file's text. The scripts are
 * defined on a connection with ioredis `defineCommand`, which sends EVALSHA and falls back to
 * EVAL on NOSCRIPT (a Redis restart or SCRIPT FLUSH forgot it).
 */

/** Each script's file beside this one, without `.lua`. */
const FILES = {
  register: 'register-n',
  registerBacklog: 'registerBacklog-n',
  claim: 'claim-n',
  claimFence: 'claimFence-n',
  acquire: 'acquire-n',
  markSent: 'markSent-n',
  requeue: 'requeue-5',
  finish: 'finish-n',
  reschedule: 'reschedule-n',
  due: 'due-1',
  isNext: 'isNext-3',
  carry: 'carry-1',
  publishOrphan: 'publishOrphan-10',
  linkRedrive: 'linkRedrive-4',
  markUnregistered: 'markUnregistered-n',
  pauseSends: 'pauseSends-1',
  claimProbe: 'claimProbe-1',
  renewLock: 'renewLock-1',
  releaseLock: 'releaseLock-1',
  projectPause: 'projectPause-3',
  projectLimit: 'projectLimit-3',
  projectShow: 'projectShow-5',
  projectUnpark: 'projectUnpark-2',
  openLanes: 'openLanes-1',
  dropHead: 'dropHead-1',
  runHistory: 'runHistory-1',
  moveRepair: 'moveRepair-2',
} as const;

export type ScriptName = keyof typeof FILES;

/** What a Lua script answers, as ioredis hands it back. */
export type Reply = string | number | null | Reply[];

/** One script: its source (includes resolved) and how many of its arguments are keys. */
export interface LuaScript {
  readonly source: string;
  /** `undefined`: as many as each call passes (a file named `-n`). */
  readonly numberOfKeys: number | undefined;
}

const INCLUDE = /^--- @include "([\w/-]+)"$/gm;

function read(name: string): string {
  const text = readFileSync(new URL(`./${name}.lua`, import.meta.url), 'utf8');
  return text.replace(INCLUDE, (_, include: string) => read(include).trimEnd());
}

function keyCount(suffix: string): number | undefined {
  return suffix === 'n' ? undefined : Number(suffix);
}

/**
 * The scripts sent with every producer MULTI (SCRIPT LOAD, see `Register.into`): their
 * comments (the header block, and lines that are only a comment) and indentation are left out of
 * their source, blank lines in place of comments keeping line numbers.
 */
const LOADED_EACH_TIME: ReadonlySet<ScriptName> = new Set(['register', 'registerBacklog']);
const HEADER = /^--\[\[[\s\S]*?\]\]\n/;

function compact(source: string): string {
  return source
    .replace(HEADER, (header) => '\n'.repeat(header.split('\n').length - 1))
    .split('\n')
    .map((line) => (line.trimStart().startsWith('--') ? '' : line.trimStart()))
    .join('\n');
}

/** Every script of the store, read from its file. */
export const LUA: Readonly<Record<ScriptName, LuaScript>> = Object.freeze(
  Object.fromEntries(
    Object.entries(FILES).map(([name, file]) => {
      const source = read(file);
      return [
        name,
        {
          source: LOADED_EACH_TIME.has(name as ScriptName) ? compact(source) : source,
          numberOfKeys: keyCount(file.slice(file.lastIndexOf('-') + 1)),
        },
      ];
    }),
  ) as Record<ScriptName, LuaScript>,
);

/** The command name of a script on a connection, apart from BullMQ's own. */
const commandOf = (name: ScriptName) => `dispatch:${name}`;

type Command = (...args: (string | number)[]) => Promise<unknown>;

/** Runs the store's scripts on one connection (or queues them on a MULTI of it). */
export interface Scripts {
  run(
    name: ScriptName,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<Reply>;
  /** Queues a script on `multi`, a MULTI of the same connection. */
  queue(
    multi: ChainableCommander,
    name: ScriptName,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): void;
}

/** Defines every script on `redis` (once per connection) and returns their runner. */
export function defineScripts(redis: Redis): Scripts {
  const defined = redis as unknown as Record<string, Command | undefined>;
  for (const [name, { source, numberOfKeys }] of Object.entries(LUA)) {
    if (!defined[commandOf(name as ScriptName)])
      redis.defineCommand(commandOf(name as ScriptName), { numberOfKeys, lua: source });
  }
  const commandOn = (target: object, name: ScriptName): Command => {
    const command = (target as Record<string, Command | undefined>)[commandOf(name)];
    if (!command) throw new Error(`script ${name} is not defined on this connection`);
    return command.bind(target);
  };
  // A script of a varying key count takes the count first.
  const counted = (name: ScriptName, keys: readonly string[]) =>
    LUA[name].numberOfKeys === undefined ? [keys.length, ...keys] : keys;
  return {
    async run(name, keys, args) {
      return (await commandOn(redis, name)(...counted(name, keys), ...args)) as Reply;
    },
    queue(multi, name, keys, args) {
      void commandOn(multi, name)(...counted(name, keys), ...args);
    },
  };
}
