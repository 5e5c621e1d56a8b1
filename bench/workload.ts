import { Queue } from 'bullmq';
import type { DispatchInput } from '../src/dispatch/creation.js';
import type { FollowUpInput } from '../src/dispatch/followup.js';
import type { Producer } from '../src/producer/index.js';
import { queueOptions } from '../src/redis/keys.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../src/simulator/index.js';
import { BENCH_API_KEY, type BenchContext, type Namespace } from './context.js';

/**
 * The load every scenario feeds in: follow-ups spread over agent jobs, enqueued in batches of 100,
 * through our producer or as bare BullMQ jobs for the baseline, to a simulator in this process.
 */

/** The queue of the baseline's jobs, beside ours in the same namespace. */
export const BASELINE_QUEUE = 'baseline';

/** A baseline job: everything the POST needs travels in the payload. */
export interface BaselineJob {
  readonly projectId: string;
  readonly jobId: string;
  readonly prompt: string;
}

/** Enqueue batch size, as the issue asks: one round trip per 100 follow-ups. */
export const BATCH = 100;

/** A prompt of about 150 bytes, a typical short follow-up instruction. */
const PROMPT =
  'Please rebase onto main, fix the failing lint step and push again. Keep the diff small';

/**
 * `n` follow-ups, one per agent job (`j<i>`), round-robin over `projects` projects named
 * `<tag><p>`: with one follow-up per agent job, lane order never holds a send back.
 */
export function followUps(n: number, projects: number, tag = 'p'): FollowUpInput[] {
  return Array.from({ length: n }, (_, i) => ({
    projectId: `${tag}${i % projects}`,
    jobId: `j${i}`,
    prompt: `${PROMPT} (#${i}, ${tag}${i % projects})`,
  }));
}

/** Splits `items` into batches of `size`. */
export function batches<T>(items: readonly T[], size = BATCH): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Enqueues through our producer, one `sendMany` of {@link BATCH} at a time; the dispatch ids. */
export async function enqueueOurs(
  producer: Producer,
  inputs: readonly DispatchInput[],
): Promise<string[]> {
  const ids: string[] = [];
  for (const batch of batches(inputs)) {
    for (const result of await producer.sendMany(batch)) ids.push(result.dispatchId);
  }
  return ids;
}

/**
 * The baseline's producer side: a bare BullMQ queue. Its event stream is capped as ours is
 * (`queueOptions`): BullMQ's default keeps 10,000 entries, a fixed cost that would count as about
 * 40 bytes per follow-up at the bench's 10,000 and nothing per follow-up past that.
 */
export function baselineQueue(ctx: BenchContext, ns: Namespace): Queue<BaselineJob> {
  const queue = new Queue<BaselineJob>(BASELINE_QUEUE, {
    connection: ctx.connection,
    ...queueOptions(ns.prefix),
  });
  queue.on('error', () => {
    // Surfaces through the rejected addBulk.
  });
  return queue;
}

/**
 * Enqueues as bare BullMQ jobs, `addBulk` of {@link BATCH} at a time. Retention of finished jobs
 * is the same as ours, and set where ours is: on the Worker (bench/baseline-worker.ts), not in
 * each job, so the comparison is about the guarantees, not about retention.
 */
export async function enqueueBaseline(
  queue: Queue<BaselineJob>,
  inputs: readonly FollowUpInput[],
): Promise<void> {
  for (const batch of batches(inputs)) {
    await queue.addBulk(
      batch.map(({ projectId, jobId, prompt }) => ({
        name: 'followup',
        data: { projectId, jobId, prompt },
      })),
    );
  }
}

/**
 * A simulator in this process: jobs created on first use, no latency, no faults, and a send
 * limit far above any rate reached here unless a scenario sets one.
 */
export function benchSimulator(options: Partial<SimulatorOptions> = {}): Promise<Simulator> {
  return startSimulator({
    apiKey: BENCH_API_KEY,
    autoCreateJobs: true,
    sendLimit: { max: 1_000_000_000, windowMs: 1_000 },
    ...options,
  });
}

/** Polls `check` every `intervalMs` until it is true; throws after `timeoutMs`. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 120_000,
  intervalMs = 10,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
