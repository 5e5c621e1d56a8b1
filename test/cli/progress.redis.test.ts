import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProgress } from '../../src/cli/progress.js';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES, shardLayout, shardOf } from '../../src/redis/keys.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { eventually, useNamespace } from '../support/namespace.js';

const SHARDS = 3;

describe("start's progress line with DISPATCH_SHARDS=3", () => {
  const ns = useNamespace('progress', { scope: 'all', shards: SHARDS });
  let queues: Queue[];
  const layout = () => shardLayout(ns().prefix, ns().eventsStream, SHARDS, false);
  beforeAll(() => {
    queues = layout().map(
      (s) => new Queue(QUEUE_NAMES.dispatch, { connection: ns().redis, prefix: s.prefix }),
    );
  });
  afterAll(async () => {
    for (const queue of queues ?? []) await queue.close();
  });

  it("counts every shard's queued follow-ups", async () => {
    // One project per shard, 1, 2 and 3 follow-ups: only the sum names all three shards.
    const projects = new Map<number, string>();
    for (let i = 0; projects.size < SHARDS; i++) {
      const shard = shardOf(`pr${i}`, SHARDS);
      if (!projects.has(shard)) projects.set(shard, `pr${i}`);
    }
    const producer = createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      shards: SHARDS,
      durability: { mode: 'none' },
    });
    try {
      await producer.sendMany(
        [...projects].flatMap(([shard, projectId]) =>
          Array.from({ length: shard + 1 }, (_, j) => ({ projectId, jobId: `j${j}`, prompt: 'p' })),
        ),
      );
    } finally {
      await producer.close();
    }
    let written = '';
    const out = new Writable({
      write(chunk: Buffer, _encoding, done) {
        written += chunk.toString();
        done();
      },
    });
    const shards = layout().map((s, i) => ({ queue: queues[i] as Queue, keys: keysFor(s.prefix) }));
    const stop = startProgress({ shards, redis: ns().redis, metrics: createMetrics() }, out);
    try {
      const line = await eventually(() => (written.includes('\n') ? written : undefined), {
        timeoutMs: 10_000,
        what: 'a progress line',
      });
      expect(line).toMatch(
        /^progress: queued 6 · waiting for lane or budget 0 · sending 0 · sent and tracked 0 · /,
      );
    } finally {
      stop();
    }
  });
});
