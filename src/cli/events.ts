import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import { RedisUnavailableError } from '../producer/index.js';
import { connect } from '../redis/connections.js';
import { LayoutError, recordedShardCount } from '../redis/layout.js';
import { within } from '../time/deadline.js';
import { ALL_EVENT_TYPES, readEventEntry } from '../dispatch/event.js';
import { eventTypeNamed } from '../dispatch/event-body.js';
import { CursorGapError } from '../store/event-gaps.js';
import {
  formatCursor,
  hasNewer,
  readEventPage,
  type Cursor,
  type EventFilter,
  type PagedEntry,
} from '../store/event-pages.js';
import { shardsOf } from '../runtime/shards.js';
import { fromCursor, startOf } from './events-start.js';
import { EXIT, UsageError, type Command, type CommandContext } from './command.js';
import { configOf } from './compose.js';

/** Most entries one page holds. */
const PAGE = 500;
/** How long `--follow` waits before it looks at the streams again after a read found nothing. */
const FOLLOW_POLL_MS = 200;
/** How long the first read waits for Redis before the command gives up (exit 1). */
const REACH_MS = 5_000;

/** `agent-dispatch events`: the completion events as NDJSON, without redis-cli. */
export const eventsCommand: Command = {
  name: 'events',
  summary: 'prints completion events as NDJSON; --follow keeps reading',
  usage: 'events [--follow] [--from CURSOR] [--type T]... [--project P]... [--limit N]',
  details: [
    "Reads EVENTS_STREAM (every shard's, merged in one order: by entry id, then shard) and prints one JSON object per",
    'event: the stream entry id as "id", the "cursor" that resumes after it, the fields of the contract (type,',
    'dispatchId, projectId, jobId, status, prLink, traceparent when traced, v) and "event" parsed from its JSON.',
    'Reading changes nothing in Redis: no consumer group, no acknowledgement.',
    'Without --follow it prints the events after --from and exits 0: by default every event kept, and',
    'with --limit N the newest N (oldest first); --from start (or 0) begins at the oldest kept.',
    'With --follow it then waits for new ones (from now on, unless --from is given) until SIGTERM',
    'or SIGINT. To page, pass the last printed "cursor" to --from: nothing is skipped or repeated,',
    'even while events are written (with one shard the cursor is the entry id). The shard count is',
    'the one the fleet recorded in Redis; DISPATCH_SHARDS, when set, must agree (else exit 2).',
    '--type takes a full type (followup.completed) or its short form (completed). See docs/events.md.',
    'Example: agent-dispatch events --follow --type undeliverable --project docs-site',
  ].join('\n'),
  options: {
    follow: { type: 'boolean', short: 'f', description: 'keep reading new events' },
    from: {
      type: 'string',
      placeholder: 'CURSOR',
      description:
        'print the events after this cursor (a printed "cursor"), or from the oldest: start',
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
      description: 'print N events: the newest N, unless --from or --follow is given',
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
      // The first read fails within REACH_MS when Redis cannot be reached, as enqueue and status
      // do; only --follow then waits out later outages (its connection reconnects by itself).
      await within(redis.ping(), REACH_MS, () => {
        throw new RedisUnavailableError(REACH_MS);
      });
      const shardCount = await eventsShardCount(redis, config, ctx.env['DISPATCH_SHARDS']);
      const streams = shardsOf({ ...config, shardCount }).map((s) => s.eventsStream);
      const printer = new Printer(ctx.stdout, options.limit);
      const { cursor, fromStart } = await startOf(redis, streams, options);
      await printPages(redis, streams, cursor, {
        ...options,
        fromStart,
        printer,
        signal: ctx.signal,
      });
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
    const type = eventTypeNamed(t);
    if (!type) {
      throw new UsageError(
        `--type: unknown event type "${t}"; one of ${ALL_EVENT_TYPES.join(', ')}`,
      );
    }
    return type;
  });
  const from = ctx.values['from'];
  // Its shape now, before Redis is reached; its shard count once the layout is read.
  if (typeof from === 'string') fromCursor(from, from.split('_').length);
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
    filter: { types: new Set(types), projects: new Set(list('project')) } satisfies EventFilter,
  };
}

/**
 * The shard count to read: the one the fleet recorded in Redis. `DISPATCH_SHARDS`, when set, must
 * agree with it: reading another layout's streams would print a part of the events as all of them.
 */
async function eventsShardCount(
  redis: Redis,
  config: Config,
  setting: string | undefined,
): Promise<number> {
  const recorded = await recordedShardCount(redis, config.prefix);
  if (recorded === undefined) return config.shardCount;
  if (setting !== undefined && config.shardCount !== recorded) {
    throw new LayoutError(
      'DISPATCH_SHARDS',
      `is ${config.shardCount}, but the fleet on this Redis records ${recorded} shards: set it to ${recorded}, or unset it to read the recorded layout`,
    );
  }
  return recorded;
}

/** A gap at the cursor as a {@link UsageError}: the operator picks where to go on from. */
function gapUsage(err: unknown, cursor: Cursor): unknown {
  if (!(err instanceof CursorGapError)) return err;
  const resume =
    err.kind === 'trimmed'
      ? `; go on from the oldest kept with --from ${formatCursor(err.resume(cursor))}`
      : '';
  return new UsageError(`--from: ${err.message}${resume}`);
}

/** What {@link printPages} reads and prints. */
interface PrintOptions {
  readonly follow: boolean;
  /** The first page starts at the oldest entries kept (no --from, no --follow). */
  readonly fromStart: boolean;
  readonly filter: EventFilter;
  readonly printer: Printer;
  readonly signal: AbortSignal;
}

/**
 * Prints the pages after `cursor` until the streams' ends (or the limit); with `follow`, then
 * waits for newer entries and prints them, until the signal.
 */
async function printPages(
  redis: Redis,
  streams: readonly string[],
  start: Cursor,
  { follow, filter, printer, signal, fromStart }: PrintOptions,
): Promise<void> {
  let cursor = start;
  for (let first = true; !printer.full() && !signal.aborted; first = false) {
    const limit = Math.min(PAGE, printer.room());
    const options = { limit, filter, fromStart: first && fromStart };
    const page = await readEventPage(redis, streams, cursor, options).catch((err: unknown) =>
      signal.aborted ? undefined : Promise.reject(gapUsage(err, cursor)),
    );
    if (!page) return;
    for (const entry of page.entries) printer.print(entry);
    cursor = page.next;
    if (!page.caughtUp) continue;
    if (!follow) return;
    while (!signal.aborted && !(await hasNewer(redis, streams, cursor).catch(() => false))) {
      await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
    }
  }
}

/** Writes entries as NDJSON, counting them against the limit. */
class Printer {
  #printed = 0;
  constructor(
    private readonly out: Writable,
    private readonly limit: number,
  ) {}

  full(): boolean {
    return this.#printed >= this.limit;
  }

  /** How many more lines the limit allows. */
  room(): number {
    return this.limit - this.#printed;
  }

  print({ id, cursor, fields: flat }: PagedEntry): void {
    const { event, fields } = readEventEntry(flat);
    const line = { id, cursor, ...fields, ...(fields['event'] === undefined ? {} : { event }) };
    this.out.write(`${JSON.stringify(line)}\n`);
    this.#printed++;
  }
}
