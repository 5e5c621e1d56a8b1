import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, runCliToEnd } from '../support/cli.js';
import { readEvents, waitForEvents, type StreamEvent } from '../support/events.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { startService, type InProcessService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';

/** The NDJSON lines a command printed, parsed. */
function ndjson(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('agent-dispatch events', () => {
  const simulator = useSimulator({ workTimeMs: 50 });
  const ns = useNamespace('events', { scope: 'all' });
  let service: InProcessService;
  let events: StreamEvent[];

  beforeAll(async () => {
    service = startService(ns(), simulator());
    simulator().seedJob('p1', 'j1');
    simulator().seedJob('p2', 'j2');
    // p3/missing was never created: the API answers 404 and it ends undeliverable.
    await service.producer.sendMany([
      { projectId: 'p1', jobId: 'j1', prompt: 'one', meta: { n: 1 } },
      { projectId: 'p1', jobId: 'j1', prompt: 'two' },
      { projectId: 'p2', jobId: 'j2', prompt: 'three' },
      { projectId: 'p3', jobId: 'missing', prompt: 'four' },
    ]);
    events = await waitForEvents(ns().redis, ns().eventsStream, 4);
  });

  afterAll(() => service?.close());

  it('prints every event as one JSON object per line, in stream order, and exits 0', async () => {
    const run = await runCliToEnd(['events'], ns().env());
    expect(run.code).toBe(0);
    const lines = ndjson(run.stdout);
    expect(lines.map((l) => l['id'])).toEqual(events.map((e) => e.id));
    expect(lines[0]).toMatchObject({
      type: events[0]?.type,
      dispatchId: events[0]?.dispatchId,
      projectId: events[0]?.projectId,
      status: events[0]?.status,
      v: '1',
      event: events[0]?.event,
    });
    expect(lines.filter((l) => l['type'] === 'followup.undeliverable')).toEqual([
      expect.objectContaining({
        projectId: 'p3',
        event: expect.objectContaining({ reason: 'not_found' }),
      }),
    ]);
  });

  it('filters by type (short or full name) and project, and --limit prints the newest (--from start: the oldest)', async () => {
    const short = ndjson(
      (await runCliToEnd(['events', '--type', 'undeliverable'], ns().env())).stdout,
    );
    expect(short.map((l) => l['projectId'])).toEqual(['p3']);
    const both = ndjson(
      (
        await runCliToEnd(
          ['events', '--type', 'followup.completed', '--project', 'p1', '--project', 'p2'],
          ns().env(),
        )
      ).stdout,
    );
    expect(both.map((l) => l['projectId']).sort()).toEqual(['p1', 'p1', 'p2']);
    const one = ndjson((await runCliToEnd(['events', '--limit', '1'], ns().env())).stdout);
    expect(one.map((l) => l['id'])).toEqual([events.at(-1)?.id]);
    const oldest = ndjson(
      (await runCliToEnd(['events', '--from', 'start', '--limit', '1'], ns().env())).stdout,
    );
    expect(oldest.map((l) => l['id'])).toEqual([events[0]?.id]);
  });

  it('prints only what comes after --from', async () => {
    const after = ndjson(
      (await runCliToEnd(['events', '--from', events[1]?.id ?? ''], ns().env())).stdout,
    );
    expect(after.map((l) => l['id'])).toEqual(events.slice(2).map((e) => e.id));
  });

  it('with --follow prints new events only, as they come, until SIGTERM', async () => {
    const follower = runCli(['events', '--follow'], ns().env());
    try {
      // Blocked in XREAD: from here on, every new event reaches it.
      await eventually(
        async () =>
          /name=agent-dispatch:events .*cmd=xread/.test(String(await ns().redis.client('LIST')))
            ? true
            : undefined,
        { timeoutMs: 20_000, what: 'the follower to wait in XREAD' },
      );
      const { dispatchId } = await service.producer.send({
        projectId: 'p2',
        jobId: 'j2',
        prompt: 'five',
      });
      await eventually(
        async () => (follower.output.stdout.includes(dispatchId) ? true : undefined),
        { timeoutMs: 20_000, what: 'the new event on the follower' },
      );
      expect(await follower.stop()).toBe(0);
      const lines = ndjson(follower.output.stdout);
      expect(lines.map((l) => l['dispatchId'])).toEqual([dispatchId]);
      expect((await readEvents(ns().redis, ns().eventsStream)).length).toBe(5);
    } finally {
      await follower.stop();
    }
  });

  it('gives up with exit 1, naming Redis, when Redis cannot be reached', async () => {
    const { freePort } = await import('../support/redis-server.js');
    const run = await runCliToEnd(['events'], {
      ...ns().env(),
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Redis was not reachable within 5000 ms');
  });

  it('rejects an unknown type or a malformed --from with exit 2, naming the flag', async () => {
    const badType = await runCliToEnd(['events', '--type', 'done'], ns().env());
    expect(badType.code).toBe(2);
    expect(badType.stderr).toContain('--type: unknown event type "done"');
    const badFrom = await runCliToEnd(['events', '--from', 'yesterday'], ns().env());
    expect(badFrom.code).toBe(2);
    expect(badFrom.stderr).toContain('--from: expected a cursor');
    const help = await runCliToEnd(['events', '--help'], ns().env());
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--follow');
  });
});
