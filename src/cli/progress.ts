import type { Writable } from 'node:stream';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.js';
import type { Metrics } from '../telemetry/metrics.js';

/** How often `start` looks at the queues; a line is printed only when something moved. */
const PROGRESS_EVERY_MS = 2_000;

/** What the progress line counts. */
export interface ProgressSource {
  readonly queue: Queue;
  readonly redis: Redis;
  readonly keys: Keys;
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

async function describe({ queue, redis, keys, metrics }: ProgressSource): Promise<string> {
  const [counts, tracked, events] = await Promise.all([
    queue.getJobCounts('wait', 'prioritized', 'delayed', 'active'),
    redis.zcard(keys.tracked),
    metrics.eventsPublished.get(),
  ]);
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
