import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DISPATCH_JOB_NAME } from '../../src/store/register.js';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { logLines, runCli, type CliProcess } from '../support/cli.js';
import { fleetEnv } from '../support/fleet.js';
import { useNamespace } from '../support/namespace.js';
import { useSimulator } from '../support/simulator.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { poisonCases, writeRecord } from './support/poison.js';
import { useProbe, waitForRole } from './support/quiet.js';
import { DRILL_SETTINGS, isAlive } from './support/traffic.js';

const PROMPT_MAX_BYTES = 1_000;

describe('6. poison jobs', () => {
  const simulator = useSimulator();
  const ns = useNamespace('f-poison');
  const probe = useProbe(ns, 'each');
  let queue: Queue;
  let connection: Redis;
  let worker: CliProcess | undefined;

  beforeEach(() => {
    connection = ns().redis.duplicate();
    queue = new Queue(QUEUE_NAMES.dispatch, { connection, prefix: ns().prefix });
  });
  afterEach(async () => {
    await worker?.stop('SIGKILL');
    await queue.close();
    connection.disconnect();
  });

  it('ends each payload the consumer cannot use with one undeliverable event, and runs it once', async (ctx) => {
    const watch = stopwatch();
    const cases = poisonCases(PROMPT_MAX_BYTES);
    worker = runCli(
      ['worker'],
      fleetEnv(ns(), simulator(), {
        ...DRILL_SETTINGS,
        PROMPT_MAX_BYTES: String(PROMPT_MAX_BYTES),
        LOG_LEVEL: 'info',
      }),
    );
    await waitForRole(probe(), 'dispatch', 1);
    for (const c of cases) {
      await writeRecord(ns().redis, ns().prefix, c);
      await queue.add(DISPATCH_JOB_NAME, c.data as Record<string, unknown>, {
        jobId: c.jobId,
        attempts: 3,
      });
    }
    const expected = cases.filter((c) => c.reason !== undefined).length;
    const { events, quiet } = await probe().settle(expected, 60_000);
    const logs = logLines(worker.output.stdout);
    const outcomes = await Promise.all(
      cases.map(async (c) => {
        const job = await queue.getJob(c.jobId);
        const mine = events.filter(
          (e) => e.dispatchId === c.jobId || e.event['dispatchId'] === c.jobId,
        );
        return {
          name: c.name,
          events: mine.map((e) => `${e.type}:${String(e.event['reason'])}`),
          state: job ? await job.getState() : 'gone',
          runs: job?.attemptsStarted ?? 0,
          stalls: job?.stalledCounter ?? 0,
          poisonLogs: logs.filter(
            (l) => l['msg'] === 'followup:poison' && l['bullJobId'] === c.jobId,
          ).length,
        };
      }),
    );
    const alive = isAlive(worker.child);
    const exit = await worker.stop('SIGTERM');
    const ok = (o: (typeof outcomes)[number], c: (typeof cases)[number]) =>
      o.events.join() === (c.reason ? `followup.undeliverable:${c.reason}` : '') &&
      o.state === 'completed' &&
      o.runs === 1;
    recordFigures(ctx, {
      category: 6,
      scenario: `${cases.length} jobs written with a bare BullMQ Queue.add into the dispatch queue of one worker process (attempts 3)`,
      tried: cases.length,
      faults: `${cases.length} poison payloads and records`,
      lost: outcomes.filter((o, i) => o.events.length === 0 && cases[i]?.reason !== undefined)
        .length,
      duplicated: outcomes.filter((o) => o.events.length > 1 || o.runs > 1).length,
      leaked: 0,
      notes: [
        ...outcomes.map(
          (o, i) =>
            `${o.name}: ${o.events.join(', ') || 'no new event'}; job ${o.state} after ${o.runs} run(s), ${o.stalls} stalls, ${o.poisonLogs} poison log line(s)${ok(o, cases[i] as (typeof cases)[number]) ? '' : ' ✗'}`,
        ),
        `worker alive at the end: ${alive}, exit code on SIGTERM: ${exit}; settled to an idle namespace: ${quiet}`,
      ],
      durationMs: watch(),
    });
    for (const [i, o] of outcomes.entries())
      expect(ok(o, cases[i] as (typeof cases)[number]), o.name).toBe(true);
    expect(alive).toBe(true);
    expect(exit).toBe(0);
  });
});
