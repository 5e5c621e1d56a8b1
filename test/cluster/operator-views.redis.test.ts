import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roleKit, startServing, type Serving } from '../../src/cli/compose.js';
import { loadConfig } from '../../src/config/index.js';
import { DispatchStore } from '../../src/store/store.js';
import { keysFor, shardOf } from '../../src/redis/keys.js';
import { METRIC_NAMES } from '../../src/telemetry/names.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { useSimulator } from '../support/simulator.js';
import { parseExposition } from '../telemetry/exposition.js';

const TOKEN = 'operator-views-token';
const SHARDS = 6;

describe('the dashboard, the gauges and /readyz on a cluster with DISPATCH_SHARDS=6', () => {
  const simulator = useSimulator();
  const fleet = useClusterFleet(simulator, { masters: 3, shards: SHARDS });
  let serving: Serving;
  const auth = { authorization: `Bearer ${TOKEN}` };
  const url = (path: string) => `${serving.server.url}${path}`;

  beforeAll(async () => {
    const env = fleet().env({
      // Retries are an operator's; its token sees the pages too.
      OPERATOR_TOKEN: TOKEN,
      DASHBOARD_ALLOW_RETRIES: 'true',
      HTTP_PORT: '0',
      SHARDS: '0-2',
    });
    const config = loadConfig(env, {}, { required: [] });
    const worker = { name: 'worker', running: () => true, close: () => Promise.resolve() };
    serving = await startServing(roleKit(config), {
      name: 'views',
      dashboard: true,
      intake: false,
      roles: [worker],
    });
    // Shard s holds s + 1 queued follow-ups (no worker runs, so they wait).
    const projects = fleet().evenProjects(SHARDS, 'view');
    const producer = fleet().producer();
    try {
      await producer.sendMany(
        projects.flatMap((projectId) =>
          Array.from({ length: shardOf(projectId, SHARDS) + 1 }, (_, j) => ({
            projectId,
            jobId: `j${j}`,
            prompt: `prompt ${j}`,
          })),
        ),
      );
    } finally {
      await producer.close();
    }
  }, 60_000);
  afterAll(() => serving?.close());

  it("lists every shard's queues on bull-board, named after the shard, with the shard's jobs", async () => {
    const res = await fetch(url('/dashboard/api/queues'), { headers: auth });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      queues: { name: string; description?: string; counts: Record<string, number> }[];
    };
    const names = body.queues.map((q) => q.name).sort();
    const expected = Array.from({ length: SHARDS }, (_, s) => [
      `shard ${s}: dispatch`,
      `shard ${s}: poll`,
    ]).flat();
    expect(names).toEqual(expected.sort());
    for (let s = 0; s < SHARDS; s++) {
      const queue = body.queues.find((q) => q.name === `shard ${s}: dispatch`);
      expect(queue?.counts['waiting']).toBe(s + 1);
      expect(queue?.description).toBe(`keys under ${fleet().shards()[s]?.prefix}`);
    }
  });

  it("lets a retry through to a shard's queue by its board name only", async () => {
    const retry = (name: string) =>
      fetch(url(`/dashboard/api/queues/${encodeURIComponent(name)}/retry/failed`), {
        method: 'PUT',
        headers: { ...auth, 'sec-fetch-site': 'same-origin' },
      });
    expect((await retry('shard 2: dispatch')).status).toBe(200);
    expect((await retry('dispatch')).status).toBe(403);
  });

  it("reads every shard's queues into the gauges, one series per shard", async () => {
    const families = parseExposition(await (await fetch(url('/metrics'))).text());
    const waiting = families
      .get(METRIC_NAMES.queueJobs)
      ?.samples.filter((x) => x.labels['queue'] === 'dispatch' && x.labels['state'] === 'waiting')
      .map((x) => [x.labels['shard'], x.value])
      .sort();
    expect(waiting).toEqual(Array.from({ length: SHARDS }, (_, s) => [String(s), s + 1]));
    const tracked = families.get(METRIC_NAMES.trackedFollowups)?.samples ?? [];
    expect(tracked.map((x) => x.labels['shard']).sort()).toEqual(['0', '1', '2', '3', '4', '5']);
    expect(families.get(METRIC_NAMES.redisUp)?.samples.map((x) => x.value)).toEqual([1]);
  });

  it("walks and counts each shard's open follow-ups, lanes of one read by a script on the shard's slot", async () => {
    const shards = fleet().shards();
    const projects = fleet().evenProjects(SHARDS, 'view');
    for (const [s, shard] of shards.entries()) {
      const store = new DispatchStore(fleet().redis, keysFor(shard.prefix), {
        eventsStream: shard.eventsStream,
        eventsMaxLen: 100,
        retentionMs: 60_000,
      });
      const { dispatches, complete } = await store.open.first(100);
      expect(complete).toBe(true);
      expect(dispatches).toHaveLength(s + 1);
      expect(dispatches.every((d) => d.laneOfOne && d.state === 'queued')).toBe(true);
      expect(await store.open.count()).toBe(s + 1);
      const projectId = projects.find((p) => shardOf(p, SHARDS) === s) ?? '';
      const shown = await store.projects.show(projectId, {
        max: 100,
        windowMs: 3_600_000,
        toleranceMs: 0,
      });
      expect(shown).toMatchObject({ queued: s + 1, countsExact: true });
    }
  });

  it("reports the send pause of each served shard on /readyz, and every shard's in the gauge", async () => {
    const shards = fleet().shards();
    const ready = await (await fetch(url('/readyz'))).json();
    expect(ready).toMatchObject({
      status: 'ready',
      checks: { redis: 'ok', 'auth:shard 0': 'ok', 'auth:shard 1': 'ok', 'auth:shard 2': 'ok' },
    });
    // Shard 1 is served by this process (SHARDS=0-2), shard 4 is not.
    for (const s of [1, 4]) {
      const store = new DispatchStore(fleet().redis, keysFor(shards[s]?.prefix ?? ''), {
        eventsStream: shards[s]?.eventsStream ?? '',
        eventsMaxLen: 100,
        retentionMs: 60_000,
      });
      await store.pause.start(401);
    }
    const res = await fetch(url('/readyz'));
    expect(res.status).toBe(503);
    const { checks } = (await res.json()) as { checks: Record<string, string> };
    expect(checks['auth:shard 0']).toBe('ok');
    expect(checks['auth:shard 1']).toMatch(
      /^paused: the agent API answered 401 \(replace the key\)/,
    );
    expect(checks['auth:shard 2']).toBe('ok');
    expect(Object.keys(checks).filter((c) => c.startsWith('auth'))).toHaveLength(3);

    const families = parseExposition(await (await fetch(url('/metrics'))).text());
    const paused = families
      .get(METRIC_NAMES.authPaused)
      ?.samples.map((x) => [x.labels['shard'], x.value])
      .sort();
    expect(paused).toEqual([
      ['0', 0],
      ['1', 1],
      ['2', 0],
      ['3', 0],
      ['4', 1],
      ['5', 0],
    ]);
  });
});
