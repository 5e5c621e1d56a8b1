import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { MAX_PAGE, MIN_PAGE, repairPage, sweepLostJobs } from '../../src/poller/repair.js';
import { keysFor, QUEUE_NAMES } from '../../src/redis/keys.js';
import { OPEN_WALK_START, type DispatchStore } from '../../src/store/store.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { useStore, type StoreFixture } from '../support/store.js';

/** Every open dispatch's id, in the order a repair pass walks them. */
async function walkOrder(store: DispatchStore): Promise<string[]> {
  const ids: string[] = [];
  for (let cursor: string | undefined = OPEN_WALK_START; cursor !== undefined;) {
    const page = await store.open.page(cursor, 2_000, Number.MAX_SAFE_INTEGER);
    ids.push(...page.dispatches.map((d) => d.dispatchId));
    cursor = page.next(0);
  }
  return ids;
}

/** `lanes` lanes of one in each of `projects` projects, plus one lane of `deep` in each. */
function backlog(projects: number, lanes: number, deep: number): FollowUpInput[] {
  const inputs: FollowUpInput[] = [];
  for (let p = 0; p < projects; p++) {
    for (let j = 0; j < lanes; j++)
      inputs.push({ projectId: `p${p}`, jobId: `j${j}`, prompt: 'x' });
    for (let n = 0; n < deep; n++)
      inputs.push({ projectId: `p${p}`, jobId: 'deep', prompt: `${n}` });
  }
  return inputs;
}

/** Registers `inputs` in batches of 2 000. */
async function sendAll(producer: StoreFixture['producer'], inputs: FollowUpInput[]): Promise<void> {
  for (let i = 0; i < inputs.length; i += 2_000)
    await producer.sendMany(inputs.slice(i, i + 2_000));
}

/** The dispatch queue, counting its adds: one call per round trip to Redis. */
class CountingQueue extends Queue {
  readonly calls = { add: 0, addBulk: 0 };
  override add(...args: Parameters<Queue['add']>): ReturnType<Queue['add']> {
    this.calls.add++;
    return super.add(...args);
  }
  override addBulk(...args: Parameters<Queue['addBulk']>): ReturnType<Queue['addBulk']> {
    this.calls.addBulk++;
    return super.addBulk(...args);
  }
}

/** The sweep only looks at dispatches older than the grace (1 s in these tests). */
const pastGrace = () => new Promise((r) => setTimeout(r, 1_100));

describe('the page of a repair pass follows the backlog', () => {
  const defaults = { repairGraceMs: 60_000, pollIntervalMs: 5_000 };

  it('reads enough a tick that a pass takes the ticks of one REPAIR_GRACE, within its bounds', () => {
    expect(repairPage(0, defaults)).toBe(MIN_PAGE);
    expect(repairPage(20_000, defaults)).toBe(1_667);
    expect(Math.ceil(20_000 / repairPage(20_000, defaults))).toBe(12);
    expect(repairPage(200_000, defaults)).toBe(MAX_PAGE);
    // A grace shorter than a poll interval: one tick per pass, as far as the cap allows.
    expect(repairPage(3_000, { repairGraceMs: 1_000, pollIntervalMs: 5_000 })).toBe(3_000);
    // What is left, over the ticks left: 18 000 in 3 ticks, 5 000 (capped) in 1.
    expect(repairPage(18_000, defaults, 3)).toBe(MAX_PAGE);
    expect(repairPage(4_000, defaults, 4)).toBe(1_000);
    expect(repairPage(4_000, defaults, 0)).toBe(4_000);
  });
});

describe('a repair pass over a large backlog', () => {
  const fixture = useStore('repair-pass');
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0)) await close();
  });

  it('ends within the ticks of one REPAIR_GRACE and repairs a lost job at its far end', async () => {
    const { ns, producer, store } = fixture();
    // Ten ticks fit in a grace: 12 000 open dispatches take 10 pages of 1 200 (24 of 500 fixed).
    const config = ns.config({ REPAIR_GRACE: '1s', POLL_INTERVAL: '100ms' });
    const inputs = backlog(8, 1_000, 500);
    for (let i = 0; i < inputs.length; i += 2_000)
      await producer.sendMany(inputs.slice(i, i + 2_000));
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    closing.push(() => queue.close());
    const order = await walkOrder(store);
    expect(order).toHaveLength(12_000);
    // The last one the pass reaches loses its BullMQ job behind the service's back.
    const lost = order.at(-1) as string;
    expect(await queue.remove(lost)).toBe(1);
    // The sweep looks only at dispatches older than the grace.
    await new Promise((r) => setTimeout(r, 1_100));

    const metrics = createMetrics();
    const ctx = { config, store, queue, metrics, logger: createLogger('silent') };
    const pages: number[] = [];
    let repaired = 0;
    for (let ended = false; !ended;) {
      // No time budget here: the page's size is what this test is about.
      const result = await sweepLostJobs(ctx, undefined, Infinity);
      pages.push(result.checked);
      repaired += result.repaired;
      ended = result.passEnded;
      if (pages.length > 30) throw new Error(`the pass did not end: ${pages.join(', ')}`);
    }
    // Ten pages, and at most one more: a walk learns it is over from a read that may come empty.
    expect(pages.length).toBeLessThanOrEqual(10 + 1);
    expect(pages.reduce((a, b) => a + b, 0)).toBe(12_000);
    expect(pages[0]).toBe(1_200);
    expect(repaired).toBe(1);
    expect(await queue.getJobState(lost)).toBe('waiting');
    expect(await ns.redis.exists(keysFor(ns.prefix).repairPass)).toBe(0);
    expect(Number(await ns.redis.hget(keysFor(ns.prefix).repairLast, 'seconds'))).toBeGreaterThan(
      0,
    );
  }, 120_000);

  it('sizes each tick from what is left: a backlog that grows mid-pass still ends in the planned ticks', async () => {
    const { ns, producer, store } = fixture();
    // Ten ticks planned; 5 000 open at the start: pages of 500.
    const config = ns.config({ REPAIR_GRACE: '1s', POLL_INTERVAL: '100ms' });
    await sendAll(producer, backlog(5, 0, 1_000));
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    closing.push(() => queue.close());
    await pastGrace();
    const ctx = { config, store, queue, metrics: createMetrics(), logger: createLogger('silent') };
    const pages = [(await sweepLostJobs(ctx, undefined, Infinity)).checked];
    expect(pages[0]).toBe(MIN_PAGE);
    // The backlog triples during the pass; a page fixed at the start would take 30 ticks.
    const more = backlog(10, 0, 1_000).map((f) => ({ ...f, projectId: `q${f.projectId}` }));
    await sendAll(producer, more);
    await pastGrace();
    for (let ended = false; !ended;) {
      const result = await sweepLostJobs(ctx, undefined, Infinity);
      pages.push(result.checked);
      ended = result.passEnded;
      if (pages.length > 40) throw new Error(`the pass did not end: ${pages.join(', ')}`);
    }
    expect(pages.reduce((a, b) => a + b, 0)).toBe(15_000);
    expect(pages.length, pages.join(', ')).toBeLessThanOrEqual(10 + 1);
    expect(Math.max(...pages)).toBe(MAX_PAGE);
  }, 120_000);

  it('stops a tick’s page at its time budget and re-adds each part’s lost jobs in one call', async () => {
    const { ns, producer, store } = fixture();
    const config = ns.config({ REPAIR_GRACE: '1s', POLL_INTERVAL: '100ms' });
    await sendAll(producer, backlog(3, 0, 1_000));
    const queue = new CountingQueue(QUEUE_NAMES.dispatch, {
      connection: ns.redis.duplicate(),
      prefix: ns.prefix,
    });
    closing.push(() => queue.close());
    // Every job is lost behind the service's back.
    await queue.drain(true);
    expect(await queue.count()).toBe(0);
    await pastGrace();
    const ctx = { config, store, queue, metrics: createMetrics(), logger: createLogger('silent') };
    const page = () => MAX_PAGE;
    // A budget spent at once: the tick reads its first part (1 000), not its page of 5 000.
    const first = await sweepLostJobs(ctx, page, 0);
    expect(first).toEqual({ checked: 1_000, repaired: 1_000, passEnded: false });
    expect(queue.calls).toEqual({ add: 0, addBulk: 1 });
    // Unbounded, the next tick reads the rest, one addBulk per part of 1 000.
    const rest = await sweepLostJobs(ctx, page, Infinity);
    expect(rest).toMatchObject({ checked: 2_000, repaired: 2_000 });
    expect(queue.calls).toEqual({ add: 0, addBulk: 3 });
    expect(await queue.count()).toBe(3_000);
  }, 120_000);
});
