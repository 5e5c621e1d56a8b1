import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { RedisUnavailableError } from '../producer/index.js';
import { connect } from '../redis/connections.js';
import { within } from '../runtime/deadline.js';
import { EVENT_TYPES, readEventEntry } from '../dispatch/event.js';
import { compareIds } from '../dispatch/event-reader.js';
import { shardsOf } from '../runtime/shards.js';
import { EXIT, UsageError, type Command, type CommandContext } from './command.js';
import { configOf } from './compose.js';

/** Entries read per XRANGE or XREAD call. */
const PAGE = 500;
/** How long `--follow` waits before it reads the streams again after a read found nothing. */
const FOLLOW_POLL_MS = 200;
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
    'Reads EVENTS_STREAM (every shard\'s, merged by id) and prints one JSON object per event: the stream entry id as "id", the',
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
    const redis = connect(config, 'worker', 'events');
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
      // Every shard's stream, read as one (see event-reader.ts): one command per stream.
      const streams = shardsOf(config).map((s) => s.eventsStream);
      let lasts: readonly string[] = fromNow
        ? await Promise.all(streams.map((s) => newestId(redis, s)))
        : await printRange(redis, streams, options.from ?? '-', printer);
      while (options.follow && !printer.full() && !ctx.signal.aborted) {
        const before = lasts;
        lasts = await printNext(redis, streams, lasts, printer).catch((err: unknown) => {
          if (ctx.signal.aborted) return before;
          throw err;
        });
        if (lasts === before) await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
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

/** An entry of one stream: its index among the streams, id and flat fields. */
type Entry = readonly [stream: number, id: string, fields: string[]];

/**
 * Prints the entries after `after` in every stream up to their ends, each round's pages merged by
 * id; resolves to the last id read in each stream.
 */
async function printRange(
  redis: Redis,
  streams: readonly string[],
  after: string,
  printer: Printer,
): Promise<string[]> {
  const lasts = streams.map(() => after);
  for (;;) {
    const pages = await Promise.all(
      streams.map((s, i) => {
        const last = lasts[i] ?? after;
        return redis.xrange(s, last === '-' ? '-' : `(${last}`, '+', 'COUNT', PAGE);
      }),
    );
    const entries = pages.flatMap((page, i) => page.map(([id, f]): Entry => [i, id, f]));
    if (!printMerged(entries, lasts, printer)) return lasts;
    if (pages.every((page) => page.length < PAGE)) return lasts;
  }
}

/** Prints `entries` in id order, moving each stream's last id; false once the limit is reached. */
function printMerged(entries: Entry[], lasts: string[], printer: Printer): boolean {
  for (const [i, id, fields] of entries.sort((a, b) => compareIds(a[1], b[1]))) {
    if (printer.full()) return false;
    printer.print(id, fields);
    lasts[i] = id;
  }
  return true;
}

/** The id of the newest entry of `stream`, or `0-0` when it is empty. */
async function newestId(redis: Redis, stream: string): Promise<string> {
  const [newest] = await redis.xrevrange(stream, '+', '-', 'COUNT', 1);
  return newest?.[0] ?? '0-0';
}

/**
 * Reads what came after each stream's last id (one XREAD per stream: a cluster refuses one across
 * slots), prints it merged; resolves to the new last ids, or `lasts` itself when nothing came.
 */
async function printNext(
  redis: Redis,
  streams: readonly string[],
  lasts: readonly string[],
  printer: Printer,
): Promise<readonly string[]> {
  const replies = await Promise.all(
    streams.map((s, i) => redis.xread('COUNT', PAGE, 'STREAMS', s, lasts[i] ?? '0-0')),
  );
  const entries = replies.flatMap((reply, i) =>
    (reply ?? []).flatMap(([, page]) => page.map(([id, f]): Entry => [i, id, f])),
  );
  if (entries.length === 0) return lasts;
  const next = [...lasts];
  printMerged(entries, next, printer);
  return next;
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
    const { type, projectId, event, fields } = readEventEntry(flat);
    const { types, projects } = this.filter;
    if (types.size > 0 && !types.has(type)) return;
    if (projects.size > 0 && !projects.has(projectId)) return;
    const line = { id, ...fields, ...(fields['event'] === undefined ? {} : { event }) };
    this.out.write(`${JSON.stringify(line)}\n`);
    this.#printed++;
  }
}
