/**
 * Reads agent-dispatch's completion events with a consumer group: each event is handled by one
 * consumer of the group, and acknowledged (XACK) only once handled, so a consumer that dies
 * leaves its pending events to be claimed by another (XAUTOCLAIM).
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/consume-events.ts [--group billing] [--count N]
 *
 * Settings: REDIS_URL, EVENTS_STREAM (default agent-dispatch:events).
 */
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';

const { values } = parseArgs({
  options: {
    group: { type: 'string', default: 'example-consumers' },
    consumer: { type: 'string', default: `${hostname()}-${process.pid}` },
    count: { type: 'string' },
  },
});
const stream = process.env['EVENTS_STREAM'] ?? 'agent-dispatch:events';
const group = values.group as string;
const consumer = values.consumer as string;
const stopAfter = values.count === undefined ? Infinity : Number(values.count);
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');

/** Creates the group at the stream's start ('0'); an existing group is fine. */
async function ensureGroup(): Promise<void> {
  try {
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('BUSYGROUP')) throw err;
  }
}

/** What a real consumer would do: here, print one line per event. */
function handle(id: string, fields: Record<string, string>): void {
  const event = JSON.parse(fields['event'] ?? '{}') as { meta?: unknown; reason?: string | null };
  const pr = fields['prLink'] ? ` ${fields['prLink']}` : '';
  const reason = event.reason ? ` (${event.reason})` : '';
  console.log(
    `${id} ${fields['type']} ${fields['dispatchId']} ${fields['projectId']}/${fields['jobId']}${pr}${reason} meta=${JSON.stringify(event.meta ?? null)}`,
  );
}

async function main(): Promise<void> {
  await ensureGroup();
  let handled = 0;
  // First our own pending entries (handled before a crash, not yet acked), then new ones ('>').
  let cursor = '0';
  while (handled < stopAfter) {
    const reply = (await redis.xreadgroup(
      'GROUP',
      group,
      consumer,
      'COUNT',
      100,
      'BLOCK',
      5_000,
      'STREAMS',
      stream,
      cursor,
    )) as [string, [string, string[]][]][] | null;
    const entries = reply?.[0]?.[1] ?? [];
    if (cursor === '0' && entries.length === 0) cursor = '>';
    for (const [id, list] of entries) {
      const fields: Record<string, string> = {};
      for (let i = 0; i + 1 < list.length; i += 2)
        fields[list[i] as string] = list[i + 1] as string;
      handle(id, fields);
      await redis.xack(stream, group, id);
      if (++handled >= stopAfter) break;
    }
  }
}

main()
  .catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => redis.disconnect());
