import type { Writable } from 'node:stream';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.js';
import type { Metrics } from '../telemetry/metrics.js';

/** How often `start` looks at the queues; a line is printed only when something moved. */
const PROGRESS_EVERY_MS = 2_000;

/** What the progress line counts: every shard's dispatch queue and tracked set. */
export interface ProgressSource {
  readonly shards: readonly { readonly queue: Queue; readonly keys: Keys }[];
  readonly redis: Redis;
  readonly metrics: Metrics;
}

/**
 * Prints one line to `out` whenever follow-ups moved: queued, waiting (for their lane or their
 * project's budget), sending, being tracked, and the events published by type. Returns `stop`.
 */
export function startProgress(source: ProgressSource, out: Writable): () => void {
  let last = '';
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    describe(source)
      .then((line) => {
        if (line !== last) out.write(`progress: ${line}\n`);
        last = line;
      })
      .catch(() => {
        // Redis is away: /readyz and the logs say so; the line resumes when it is back.
      })
      .finally(() => (running = false));
  }, PROGRESS_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}

async function describe({ shards, redis, metrics }: ProgressSource): Promise<string> {
  const [perShard, trackedPerShard, events] = await Promise.all([
    Promise.all(
      shards.map((s) => s.queue.getJobCounts('wait', 'prioritized', 'delayed', 'active')),
    ),
    Promise.all(shards.map((s) => redis.zcard(s.keys.tracked))),
    metrics.eventsPublished.get(),
  ]);
  const counts: Record<string, number> = {};
  for (const shard of perShard)
    for (const [state, n] of Object.entries(shard)) counts[state] = (counts[state] ?? 0) + n;
  const tracked = trackedPerShard.reduce((a, b) => a + b, 0);
  const byType = new Map(events.values.map((v) => [String(v.labels['type']), v.value]));
  const ended = (type: string) => byType.get(`followup.${type}`) ?? 0;
  return [
    `queued ${(counts['wait'] ?? 0) + (counts['prioritized'] ?? 0)}`,
    `waiting for lane or budget ${counts['delayed'] ?? 0}`,
    `sending ${counts['active'] ?? 0}`,
    `sent and tracked ${tracked}`,
    `completed ${ended('completed')}`,
    `failed ${ended('failed')}`,
    `archived ${ended('archived')}`,
    `timed out ${ended('timed_out')}`,
    `undeliverable ${ended('undeliverable')}`,
  ].join(' · ');
}
