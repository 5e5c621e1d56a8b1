import { Redis } from 'ioredis';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { createProducer, type Producer } from '../../src/producer/index.js';
import { parseDurability } from '../../src/config/durability.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { startPrivateRedis, type PersistenceOptions } from '../../test/support/redis-server.js';
import { startRoles, stopAll, waitForWorkers } from '../../test/support/roles.js';
import { BENCH_API_KEY, type BenchContext } from '../context.js';
import type { ScenarioRun } from '../report.js';
import { ms, num, percentile } from '../stats.js';

/**
 * The cost of `REDIS_DURABILITY`, side by side in one run: on Valkey, `fsync` (WAITAOF after the
 * producer's MULTI, after ACQUIRE and MARK_SENT, after a FINISH that frees a lane) against `none`; on Redis 7.0
 * (no WAITAOF), `appendfsync always` against `everysec`. Each side gets a server of its own (a
 * private `valkey-server` or `redis-server`), an in-process simulator and one worker process.
 */

interface Side {
  readonly label: string;
  readonly binary: 'valkey-server' | 'redis-server';
  readonly persistence: PersistenceOptions;
  readonly durability: 'fsync' | 'none';
}

const SIDES: readonly Side[] = [
  { label: 'Valkey, fsync', binary: 'valkey-server', persistence: {}, durability: 'fsync' },
  { label: 'Valkey, none', binary: 'valkey-server', persistence: {}, durability: 'none' },
  {
    label: 'Redis 7.0, appendfsync always',
    binary: 'redis-server',
    persistence: { appendfsync: 'always' },
    durability: 'fsync',
  },
  {
    label: 'Redis 7.0, appendfsync everysec',
    binary: 'redis-server',
    persistence: {},
    durability: 'none',
  },
];

interface Figures {
  readonly enqueuePerSecond: number;
  readonly sendsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

const BATCH = 100;

/** Follow-ups to distinct agent jobs (no lane waits), `tag`ged so each side's are its own. */
function inputs(n: number, tag: string): FollowUpInput[] {
  return Array.from({ length: n }, (_, i) => ({
    projectId: `p${i % 10}`,
    jobId: `${tag}-j${i}`,
    prompt: `${tag} #${i}`,
  }));
}

/** Enqueues `all` in batches of 100, one batch in flight; resolves to when each was accepted. */
async function enqueue(producer: Producer, all: readonly FollowUpInput[]): Promise<number[]> {
  const acceptedAt: number[] = [];
  for (let i = 0; i < all.length; i += BATCH) {
    await producer.sendMany(all.slice(i, i + BATCH));
    const now = Date.now();
    for (let k = i; k < Math.min(i + BATCH, all.length); k++) acceptedAt.push(now);
  }
  return acceptedAt;
}

async function measure(ctx: BenchContext, side: Side, n: number): Promise<Figures> {
  const server = await startPrivateRedis(side.binary, side.persistence);
  const simulator: Simulator = await startSimulator({
    apiKey: BENCH_API_KEY,
    port: 0,
    host: '127.0.0.1',
    autoCreateJobs: true,
    workTimeMs: 50,
    sendLimit: { max: 1_000_000, windowMs: 1_000 },
  });
  const admin = new Redis(server.url, { maxRetriesPerRequest: null });
  const prefix = `bench-durable-${side.binary}-${side.durability}`;
  const durability = parseDurability(side.durability);
  const producer = createProducer({ redisUrl: server.url, prefix, durability });
  try {
    // Enqueue alone, no worker running.
    const started = performance.now();
    await enqueue(producer, inputs(n, 'enqueue'));
    const enqueuePerSecond = (n * 1000) / (performance.now() - started);
    // Sends: one worker process, then the same number of follow-ups.
    const worker = startRoles('worker', 1, {
      REDIS_URL: server.url,
      DISPATCH_PREFIX: `${prefix}-send`,
      EVENTS_STREAM: `${prefix}-send:events`,
      AGENT_API_URL: simulator.url,
      AGENT_API_KEY: BENCH_API_KEY,
      SEND_RATE_LIMIT: '1000000/1s',
      WORKER_CONCURRENCY: '64',
      REDIS_DURABILITY: side.durability,
      LOG_LEVEL: 'warn',
      SHUTDOWN_TIMEOUT: '5s',
    });
    try {
      await waitForWorkers({ redis: admin, prefix: `${prefix}-send` }, 1, {
        processes: worker,
        timeoutMs: 60_000,
      });
      const sendProducer = createProducer({
        redisUrl: server.url,
        prefix: `${prefix}-send`,
        durability,
      });
      const all = inputs(n, 'send');
      const from = Date.now();
      const acceptedAt = await enqueue(sendProducer, all).finally(() => sendProducer.close());
      const deadline = Date.now() + 120_000;
      while (simulator.deliveries.length < n && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      const deliveries = simulator.deliveries;
      const last = Math.max(...deliveries.map((d) => d.at));
      const index = new Map(all.map((f, i) => [f.prompt, i]));
      const latencies = deliveries.map((d) => d.at - (acceptedAt[index.get(d.prompt) ?? 0] ?? 0));
      return {
        enqueuePerSecond,
        sendsPerSecond: (deliveries.length * 1000) / Math.max(1, last - from),
        p50Ms: percentile(latencies, 50),
        p99Ms: percentile(latencies, 99),
      };
    } finally {
      await stopAll(worker);
    }
  } finally {
    await producer.close();
    admin.disconnect();
    await simulator.close();
    await server.destroy();
  }
}

/** The scenario's run (registered in run.ts). */
export const durabilityScenario: ScenarioRun = async (ctx, n) => {
  const rows: string[][] = [];
  const figures: Figures[] = [];
  for (const side of SIDES) {
    ctx.progress('durability', `${side.label}: starting`);
    const f = await measure(ctx, side, n);
    figures.push(f);
    ctx.progress(
      'durability',
      `${side.label}: enqueue ${num(f.enqueuePerSecond)}/s, sends ${num(f.sendsPerSecond)}/s, p50 ${ms(f.p50Ms)}, p99 ${ms(f.p99Ms)}`,
    );
    rows.push([
      side.label,
      `REDIS_DURABILITY=${side.durability}`,
      num(f.enqueuePerSecond),
      num(f.sendsPerSecond),
      ms(f.p50Ms),
      ms(f.p99Ms),
    ]);
  }
  const [fsync, none, always, everysec] = figures as [Figures, Figures, Figures, Figures];
  return {
    title: 'Durable acknowledgements: what REDIS_DURABILITY costs',
    summary: `On Valkey, fsync against none: enqueue ${num(fsync.enqueuePerSecond)} vs ${num(none.enqueuePerSecond)}/s, sends ${num(fsync.sendsPerSecond)} vs ${num(none.sendsPerSecond)}/s; Redis 7.0 appendfsync always against everysec: sends ${num(always.sendsPerSecond)} vs ${num(everysec.sendsPerSecond)}/s.`,
    setup: `${n} follow-ups enqueued in batches of 100 (one in flight, no worker), then as many sent by one worker process (concurrency 64) to distinct agent jobs of an in-process simulator; send latency is from the batch's acceptance to the POST's arrival, so it includes the wait behind the backlog (all enqueued at once). Each side has its own private server, AOF on.`,
    tables: [
      {
        columns: ['server', 'setting', 'enqueue/s', 'sends/s', 'send p50', 'send p99'],
        rows,
      },
    ],
    limitedBy: [
      'fsync waits for one fsync per producer batch, per ACQUIRE, per MARK_SENT and per lane-freeing FINISH; Valkey groups the fsyncs of concurrent waiters, so a busy worker pays far less than one fsync per wait.',
    ],
    notes: ['One run per side (not a median of three): a single `--only durability` run.'],
  };
};
