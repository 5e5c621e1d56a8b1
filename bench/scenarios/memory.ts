import { spawn } from 'node:child_process';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { createProducer } from '../../src/producer/index.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { stopAll } from '../../test/support/roles.js';
import type { BenchContext, Namespace } from '../context.js';
import { launchRoles, roleEnv } from '../fleet.js';
import { infoNumber, keyBytes, keyEncoding, memoryOf } from '../probes.js';
import type { ScenarioRun, ScenarioResult } from '../report.js';
import { bytes, num, repeatedPairs, runs, type Repeated, type Side } from '../stats.js';
import {
  BASELINE_QUEUE,
  baselineQueue,
  benchSimulator,
  followUps,
  waitUntil,
} from '../workload.js';
import { enqueueBaseline, enqueueOurs } from '../workload.js';

/**
 * Scenario 6: memory. Redis `used_memory` per 10,000 queued follow-ups (ours beside bare BullMQ
 * jobs), what one follow-up's keys weigh, and a worker's RSS before and after it parked 10,000
 * follow-ups that are over budget (SEND_RATE_LIMIT=1/1h on 10 projects: 10 sent, the rest parked).
 */

const PROJECTS = 10;

async function usedMemory(redis: Redis): Promise<number> {
  return infoNumber(redis, 'memory', 'used_memory');
}

/** MEMORY USAGE of every project's budget sorted set: the slot reservations of parked jobs. */
async function budgetBytes(ctx: BenchContext, ns: Namespace): Promise<number> {
  const keys = keysFor(ns.prefix);
  let total = 0;
  for (let p = 0; p < PROJECTS; p++) {
    total += await keyBytes(ctx.admin, keys.budget(`p${p}`));
  }
  return total;
}

/** One kind of key that queued follow-ups are kept in, and those keys. */
interface Part {
  readonly label: string;
  readonly keys: readonly string[];
}

/**
 * What MEMORY STATS `overhead.hashtable.main` counts per key besides the table's slots: Redis
 * 7's `dictEntry` and the value's `robj` header, 24 and 16 bytes on 64 bits.
 */
const PER_KEY_OVERHEAD_BYTES = 40;

/** Memory and the keyspace's table, as Redis accounts them: `used_memory`, and the table's slots. */
async function reading(ctx: BenchContext): Promise<{ used: number; slots: number }> {
  const stats = (await ctx.admin.call('MEMORY', 'STATS')) as unknown[];
  const field = (list: unknown[], name: string) => list[list.indexOf(name) + 1];
  const db = (field(stats, 'db.0') as unknown[] | undefined) ?? [];
  const table = Number(field(db, 'overhead.hashtable.main') ?? 0);
  const keys = Number(field(stats, 'keys.count') ?? 0);
  return { used: await usedMemory(ctx.admin), slots: table - keys * PER_KEY_OVERHEAD_BYTES };
}

/**
 * What the queued follow-ups' memory is made of, per follow-up: the keys of each part are deleted
 * in turn, and `used_memory` falls by that part's share, its keys' entries in the keyspace
 * included. The keyspace's table of slots is a part of its own: Redis shrinks it from a timer,
 * once it is less than a tenth full, so it would fall in whichever part was being deleted then.
 * What is left of `delta` is the rest: the queue's meta, id counter, marker and capped event
 * stream.
 */
async function breakdown(
  ctx: BenchContext,
  parts: readonly Part[],
  n: number,
  delta: number,
): Promise<string> {
  const shares: string[] = [];
  const start = await reading(ctx);
  let last = start;
  let freed = 0;
  for (const { label, keys } of parts) {
    for (let i = 0; i < keys.length; i += 1_000) await ctx.admin.del(...keys.slice(i, i + 1_000));
    const now = await reading(ctx);
    const part = last.used - now.used - (last.slots - now.slots);
    freed += part;
    shares.push(`${label} ${bytes(part / n)}`);
    last = now;
  }
  // The table shrinks within a few timer runs (10 a second) of the deletions that emptied it.
  await new Promise((r) => setTimeout(r, 300));
  const end = await reading(ctx);
  const slots = start.slots - end.slots;
  shares.push(`the keyspace's table of slots ${bytes(slots / n)}`);
  return [...shares, `the rest ${bytes((delta - freed - slots) / n)}`].join(', ');
}

/** The parts of our queued follow-ups (see {@link breakdown}); `ids` are their dispatch ids. */
async function ourParts(ctx: BenchContext, ns: Namespace, ids: readonly string[], prompt: number) {
  const keys = keysFor(ns.prefix);
  const first = ids[0] ?? '';
  const jobKey = (id: string) => `${ns.prefix}:${QUEUE_NAMES.dispatch}:${id}`;
  const heads = Array.from({ length: PROJECTS }, (_, p) => keys.laneHeads(`p${p}`));
  return [
    {
      label: `records (${await keyEncoding(ctx.admin, keys.dispatch(first))})`,
      keys: ids.map(keys.dispatch),
    },
    { label: `prompt keys (${bytes(prompt)} of it the prompt)`, keys: ids.map(keys.prompt) },
    {
      label: `BullMQ job hashes (${await keyEncoding(ctx.admin, jobKey(first))})`,
      keys: ids.map(jobKey),
    },
    { label: 'open index and lane projects', keys: [keys.open, keys.laneProjects] },
    { label: `lane heads (${await keyEncoding(ctx.admin, heads[0] ?? '')})`, keys: heads },
    { label: "BullMQ's wait list", keys: [`${ns.prefix}:${QUEUE_NAMES.dispatch}:wait`] },
  ];
}

/** The parts of the baseline's queued jobs (ids 1 to `n`, as BullMQ numbers them). */
async function baselineParts(ctx: BenchContext, ns: Namespace, n: number) {
  const jobKey = (id: number) => `${ns.prefix}:${BASELINE_QUEUE}:${id}`;
  return [
    {
      label: `BullMQ job hashes, the prompt in their data (${await keyEncoding(ctx.admin, jobKey(1))})`,
      keys: Array.from({ length: n }, (_, i) => jobKey(i + 1)),
    },
    { label: "BullMQ's wait list", keys: [`${ns.prefix}:${BASELINE_QUEUE}:wait`] },
  ];
}

/** The mean UTF-8 size of the prompts: both sides store each prompt once. */
function promptBytes(inputs: readonly { prompt: string }[]): number {
  return inputs.reduce((sum, i) => sum + Buffer.byteLength(i.prompt), 0) / inputs.length;
}

/**
 * Redis memory that `n` queued follow-ups take. Read with no client but the bench's admin
 * connected, before and after: a client's query and reply buffers count in `used_memory`, and a
 * bulk writer's may not have shrunk yet when its last write is answered.
 */
async function queuedBytes(ctx: BenchContext, kind: 'ours' | 'baseline', n: number) {
  const ns = await ctx.fresh('memory');
  const inputs = followUps(n, PROJECTS);
  const clients = await infoNumber(ctx.admin, 'clients', 'connected_clients');
  const before = await usedMemory(ctx.admin);
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const queue = baselineQueue(ctx, ns);
  let ids: string[] = [];
  try {
    if (kind === 'ours') ids = await enqueueOurs(producer, inputs);
    else await enqueueBaseline(queue, inputs);
  } finally {
    await Promise.all([producer.close(), queue.close()]);
  }
  await waitUntil(
    async () => (await infoNumber(ctx.admin, 'clients', 'connected_clients')) <= clients,
    "the enqueuers' connections closed",
    5_000,
    20,
  );
  const delta = (await usedMemory(ctx.admin)) - before;
  const prompt = promptBytes(inputs);
  const parts =
    kind === 'ours' ? await ourParts(ctx, ns, ids, prompt) : await baselineParts(ctx, ns, n);
  return { delta, sizes: await breakdown(ctx, parts, n, delta), beyondPrompt: delta / n - prompt };
}

/** A worker's RSS idle, then after parking `n` over-budget follow-ups; Redis memory meanwhile. */
async function parkedWorker(ctx: BenchContext, n: number) {
  const ns = await ctx.fresh('memory');
  const simulator = await benchSimulator();
  const env = roleEnv(ctx, ns, simulator, { SEND_RATE_LIMIT: '1/1h' });
  const [worker] = await launchRoles(ctx, ns, 'worker', 1, env);
  const producer = createProducer({ redisUrl: ctx.redisUrl, prefix: ns.prefix });
  const queue = new Queue(QUEUE_NAMES.dispatch, {
    connection: ctx.connection,
    prefix: ns.prefix,
  });
  try {
    const pid = worker?.child.pid ?? 0;
    await new Promise((r) => setTimeout(r, 1_000));
    const idle = memoryOf(pid).rss;
    await enqueueOurs(producer, followUps(n, PROJECTS));
    await waitUntil(
      async () => (await queue.getDelayedCount()) >= n - PROJECTS,
      `${n - PROJECTS} parked`,
      180_000,
      200,
    );
    const after = memoryOf(pid);
    const reservations = await budgetBytes(ctx, ns);
    return { idle, after, reservations, sent: simulator.deliveries.length };
  } finally {
    await stopAll(worker ? [worker] : []);
    await Promise.all([producer.close(), queue.close(), simulator.close()]);
  }
}

/**
 * RSS of an idle Node process with and without the tsx loader the CLI roles run under, so the
 * loader's share of a worker's RSS is measured, not guessed.
 */
async function loaderOverhead(): Promise<number> {
  const idleRss = async (args: string[]) => {
    const child = spawn(process.execPath, [...args, '-e', 'setTimeout(() => {}, 10_000)'], {
      stdio: 'ignore',
    });
    await new Promise((r) => setTimeout(r, 1_500));
    const rss = memoryOf(child.pid ?? 0).rss;
    child.kill();
    return rss;
  };
  return (await idleRss(['--import', 'tsx'])) - (await idleRss([]));
}

type Queued = Awaited<ReturnType<typeof queuedBytes>>;
type Parked = Awaited<ReturnType<typeof parkedWorker>>;

/** Ours over the baseline, in memory beyond the prompt. */
function ratio(ours: Queued, baseline: Queued): string {
  return `${num(ours.beyondPrompt / baseline.beyondPrompt, 2)}×`;
}

function rows(n: number, ours: Queued, baseline: Queued, worker: Parked): string[][] {
  const per10k = (b: number) => bytes((b * 10_000) / n);
  return [
    ['Redis used_memory per 10,000 queued (ours)', per10k(ours.delta)],
    ['Redis used_memory per 10,000 queued (baseline: bare BullMQ jobs)', per10k(baseline.delta)],
    [
      'Redis memory per queued follow-up beyond its prompt, ours / baseline',
      `${bytes(ours.beyondPrompt)} / ${bytes(baseline.beyondPrompt)} (${ratio(ours, baseline)})`,
    ],
    [
      'Redis: budget sorted sets holding the reservations, per 10,000 parked (ours)',
      per10k(worker.reservations),
    ],
    ['worker RSS idle', bytes(worker.idle)],
    [
      `worker RSS after parking ${num(n)} (peak)`,
      `${bytes(worker.after.rss)} (${bytes(worker.after.peak)})`,
    ],
  ];
}

function report(
  n: number,
  measured: { readonly ours: Repeated<Queued>; readonly baseline: Repeated<Queued> },
  worker: Parked,
  loader: number,
): ScenarioResult {
  const ours = measured.ours.typical;
  const baseline = measured.baseline.typical;
  return {
    title: 'Memory',
    summary:
      `${bytes((ours.delta * 10_000) / n)} of Redis memory per 10,000 queued follow-ups against ` +
      `${bytes((baseline.delta * 10_000) / n)} for bare BullMQ jobs (beyond the prompt: ` +
      `${ratio(ours, baseline)}); worker RSS ` +
      `${bytes(worker.idle)} idle, ${bytes(worker.after.rss)} after parking ${num(n)}.`,
    setup:
      `Redis: \`used_memory\` before and after enqueueing ${num(n)} follow-ups (one per agent job, ` +
      `${PROJECTS} projects, ~100-byte prompts) with no worker running and no client but the ` +
      "bench's admin connected at either reading, ours beside bare BullMQ jobs " +
      'with the same fields; beyond its prompt = per follow-up, less the mean size of the prompts ' +
      '(each side stores a prompt once). Worker: RSS (/proc VmRSS, VmHWM) of one `src/cli.ts worker` process, ' +
      `idle, then after it took all ${num(n)} with SEND_RATE_LIMIT=1/1h: ${PROJECTS} sent, the rest ` +
      "parked in BullMQ's delayed set with a reserved budget slot each. Redis: the run of median " +
      'memory of the runs of each side listed in the notes; the worker: measured once.',
    tables: [{ columns: ['figure', 'value'], rows: rows(n, ours, baseline, worker) }],
    limitedBy: [
      'What a queued follow-up is made of, per follow-up (each kind of key deleted in turn after ' +
        `the measurement, and what used_memory fell by): ours ${ours.sizes}; baseline ` +
        `${baseline.sizes}. The prompt is ` +
        'stored once, under its own key, so that every field of the record is short enough for a ' +
        'listpack; the BullMQ job carries ids only, in a payload and options short enough for a ' +
        "listpack too (src/store/jobs.ts). BullMQ's event stream is capped near 100 " +
        'entries (both sides), so it holds nothing per follow-up.',
      PARKED,
    ],
    notes: [
      `RSS includes the tsx loader (the worker runs from the TypeScript sources): ${bytes(loader)}, ` +
        'measured here as the RSS of an idle `node --import tsx` minus an idle `node`; ' +
        '`node dist/cli.js worker` would not carry it.',
      `${worker.sent} of ${num(n)} were sent (1 per project per hour), as expected.`,
      `Beyond the prompt, run by run: ours ${runs(measured.ours.values, bytes)}; baseline ` +
        `${runs(measured.baseline.values, bytes)}.`,
    ],
  };
}

const PARKED =
  "Parking adds a reservation per follow-up to its project's budget sorted set (the row above) " +
  'and moves the BullMQ job from the wait list to the delayed set. The consumer keeps no per-job ' +
  'state once a job is parked ' +
  '(its SendContext holds only a per-project 429 streak), so what the worker gained over ' +
  'idle is what the burst left in its V8 heap, not memory per parked follow-up.';

/** The scenario's run (registered in run.ts). */
export const memoryScenario: ScenarioRun = async (ctx, n) => {
  const side = (kind: 'ours' | 'baseline'): Side<Queued> => ({
    async once(run) {
      const queued = await queuedBytes(ctx, kind, n);
      ctx.progress('memory', `queued ${num(n)}, ${kind} run ${run + 1}: ${bytes(queued.delta)}`);
      return queued;
    },
    figure: (queued) => queued.beyondPrompt,
  });
  const measured = await repeatedPairs(ctx.repeats, side('ours'), side('baseline'), ctx.mayRepeat);
  const worker = await parkedWorker(ctx, n);
  ctx.progress(
    'memory',
    `worker RSS ${bytes(worker.idle)} idle, ${bytes(worker.after.rss)} after parking`,
  );
  return report(n, measured, worker, await loaderOverhead());
};
