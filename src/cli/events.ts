import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { RedisUnavailableError } from '../producer/index.js';
import { connect } from '../redis/connections.js';
import { within } from '../runtime/deadline.js';
import { EVENT_TYPES } from '../dispatch/event.js';
import { EXIT, UsageError, type Command, type CommandContext } from './command.js';
import { configOf } from './compose.js';

/** Entries read per XRANGE or XREAD call. */
const PAGE = 500;
/** How long one XREAD of `--follow` blocks before it looks at the stop signal again. */
const BLOCK_MS = 1_000;
/** How long the first read waits for Redis before the command gives up (exit 1). */
const REACH_MS = 5_000;

/** The event types `--type` accepts, by their full name and by their short one (`completed`). */
const TYPES = new Map<string, string>(
  Object.values(EVENT_TYPES).flatMap((type) => [
    [type, type],
    [type.replace(/^followup\./, ''), type],
  ]),
);

/** What `--type` and `--project` keep. Empty sets keep everything. */
interface Filter {
  readonly types: ReadonlySet<string>;
  readonly projects: ReadonlySet<string>;
}

/** `agent-dispatch events`: the completion events as NDJSON, without redis-cli. */
export const eventsCommand: Command = {
  name: 'events',
  summary: 'prints completion events as NDJSON; --follow keeps reading',
  usage: 'events [--follow] [--from ID] [--type T]... [--project P]... [--limit N]',
  details: [
    'Reads EVENTS_STREAM and prints one JSON object per event: the stream entry id as "id", the',
    'fields of the contract (type, dispatchId, projectId, jobId, status, prLink, traceparent when traced, v) and "event"',
    'parsed from its JSON. Reading changes nothing in Redis: no consumer group, no acknowledgement.',
    'Without --follow it prints the events after --from (default: the oldest kept) and exits 0;',
    'with --follow it then waits for new ones (from now on, unless --from is given) until SIGTERM',
    'or SIGINT. --type takes a full type (followup.completed) or its short form (completed).',
    'Example: agent-dispatch events --follow --type undeliverable --project docs-site',
  ].join('\n'),
  options: {
    follow: { type: 'boolean', short: 'f', description: 'keep reading new events' },
    from: {
      type: 'string',
      placeholder: 'ID',
      description: 'print the events after this stream entry id (a printed "id")',
    },
    type: {
      type: 'string',
      multiple: true,
      placeholder: 'T',
      description: 'only events of this type (repeatable)',
    },
    project: {
      type: 'string',
      multiple: true,
      placeholder: 'P',
      description: 'only events of this project (repeatable)',
    },
    limit: {
      type: 'string',
      placeholder: 'N',
      description: 'stop after printing N events',
    },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const options = parseOptions(ctx);
    const config = await configOf(this, ctx);
    const redis = connect(config.redisUrl ?? '', 'worker', 'events');
    redis.on('error', (err: Error) => {
      ctx.stderr.write(`agent-dispatch: Redis: ${err.message}\n`);
    });
    const stop = () => redis.disconnect();
    ctx.signal.addEventListener('abort', stop, { once: true });
    try {
      const printer = new Printer(ctx.stdout, options.filter, options.limit);
      // Following from now on starts after the newest entry, by id: XREAD's `$` would skip what
      // arrives between two reads.
      const fromNow = options.follow && options.from === undefined;
      // The first read fails within REACH_MS when Redis cannot be reached, as enqueue and status
      // do; only --follow then waits out later outages (its connection reconnects by itself).
      await within(redis.ping(), REACH_MS, () => {
        throw new RedisUnavailableError(REACH_MS);
      });
      let last = fromNow
        ? await newestId(redis, config.eventsStream)
        : await printRange(redis, config.eventsStream, options.from ?? '-', printer);
      while (options.follow && !printer.full() && !ctx.signal.aborted) {
        last = await printNext(redis, config.eventsStream, last, printer).catch((err: unknown) => {
          if (ctx.signal.aborted) return last;
          throw err;
        });
      }
      return EXIT.ok;
    } finally {
      ctx.signal.removeEventListener('abort', stop);
      redis.disconnect();
    }
  },
};

function parseOptions(ctx: CommandContext) {
  const list = (name: string) => {
    const value = ctx.values[name];
    return Array.isArray(value) ? value : typeof value === 'string' ? [value] : [];
  };
  const types = list('type').map((t) => {
    const type = TYPES.get(t);
    if (!type) {
      throw new UsageError(
        `--type: unknown event type "${t}"; one of ${[...new Set(TYPES.values())].join(', ')}`,
      );
    }
    return type;
  });
  const from = ctx.values['from'];
  if (typeof from === 'string' && !/^\d+(-\d+)?$/.test(from)) {
    throw new UsageError(
      `--from: expected a stream entry id such as 1732312345678-0, got "${from}"`,
    );
  }
  const limitText = ctx.values['limit'];
  const limit = typeof limitText === 'string' ? Number(limitText) : Infinity;
  if (typeof limitText === 'string' && !(/^\d+$/.test(limitText) && limit > 0)) {
    throw new UsageError(`--limit: expected a whole number above 0, got "${limitText}"`);
  }
  if (ctx.positionals.length > 0) throw new UsageError('events takes no positional arguments');
  return {
    follow: ctx.values['follow'] === true,
    from: typeof from === 'string' ? from : undefined,
    limit,
    filter: { types: new Set(types), projects: new Set(list('project')) } satisfies Filter,
  };
}

/** Prints the entries after `after` up to the end of the stream; resolves to the last id read. */
async function printRange(
  redis: Redis,
  stream: string,
  after: string,
  printer: Printer,
): Promise<string> {
  let last = after;
  for (;;) {
    const start = last === '-' ? '-' : `(${last}`;
    const entries = await redis.xrange(stream, start, '+', 'COUNT', PAGE);
    for (const [id, fields] of entries) {
      if (printer.full()) return last;
      printer.print(id, fields);
      last = id;
    }
    if (entries.length < PAGE) return last;
  }
}

/** The id of the newest entry of `stream`, or `0-0` when it is empty. */
async function newestId(redis: Redis, stream: string): Promise<string> {
  const [newest] = await redis.xrevrange(stream, '+', '-', 'COUNT', 1);
  return newest?.[0] ?? '0-0';
}

/** Waits up to {@link BLOCK_MS} for entries after `after`, prints them, resolves to the last id. */
async function printNext(
  redis: Redis,
  stream: string,
  after: string,
  printer: Printer,
): Promise<string> {
  const reply = await redis.xread('COUNT', PAGE, 'BLOCK', BLOCK_MS, 'STREAMS', stream, after);
  let last = after;
  for (const [, entries] of reply ?? []) {
    for (const [id, fields] of entries) {
      if (printer.full()) return last;
      printer.print(id, fields);
      last = id;
    }
  }
  return last;
}

/** Writes matching entries as NDJSON, counting them against the limit. */
class Printer {
  #printed = 0;
  constructor(
    private readonly out: Writable,
    private readonly filter: Filter,
    private readonly limit: number,
  ) {}

  full(): boolean {
    return this.#printed >= this.limit;
  }

  print(id: string, flat: string[]): void {
    const fields: Record<string, unknown> = { id };
    for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i] as string] = flat[i + 1];
    const { types, projects } = this.filter;
    if (types.size > 0 && !types.has(String(fields['type']))) return;
    if (projects.size > 0 && !projects.has(String(fields['projectId']))) return;
    if (typeof fields['event'] === 'string') fields['event'] = parseOrKeep(fields['event']);
    this.out.write(`${JSON.stringify(fields)}\n`);
    this.#printed++;
  }
}

function parseOrKeep(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
