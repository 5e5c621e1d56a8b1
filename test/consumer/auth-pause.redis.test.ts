import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { logLines, runCli } from '../support/cli.js';
import { duplicates, readEvents } from '../support/events.js';
import { keysFor } from '../../src/redis/keys.js';
import { fleetEnv, grid, roundsOf, useFleet } from '../support/fleet.js';
import { startRoles, stopAll } from '../support/roles.js';
import { eventually } from '../support/namespace.js';
import { freePort } from '../support/redis-server.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { addRedis, Haystack } from '../faults/support/secrets.js';

const NEW_KEY = 'sim-rotated-key-9876543210';

describe('a fleet whose agent-API key is rejected mid-run', () => {
  const simulator = useSimulator({
    workTimeMs: 30,
    sendLimit: { max: 100_000, windowMs: 1_000 },
  });
  const fleet = useFleet('auth-pause', simulator);
  let dir = '';
  let keyFile = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-key-'));
    keyFile = join(dir, 'agent-api-key');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Rewrites the key file the way a secret mount does: a new file renamed over the old one. */
  const writeKey = (key: string) => {
    writeFileSync(`${keyFile}.tmp`, `${key}\n`);
    renameSync(`${keyFile}.tmp`, keyFile);
  };

  it('pauses every send on 401, ends nothing, and resumes by itself once the key file has the new key', async () => {
    const { ns, producer } = fleet();
    writeKey(TEST_API_KEY);
    const { AGENT_API_KEY: _fromEnv, ...base } = fleetEnv(ns, simulator(), {
      SEND_RATE_LIMIT: '100000/1s',
      LOG_LEVEL: 'debug',
    });
    const env = { ...base, AGENT_API_KEY_FILE: keyFile };
    const port = await freePort();
    const probed = runCli(['worker'], { ...env, METRICS_PORT: String(port) });
    fleet().processes = [probed, ...startRoles('worker', 2, env), ...startRoles('poller', 1, env)];
    const inputs = grid(simulator(), 4, 5, 10);
    expect(inputs).toHaveLength(200);
    await producer.sendMany(inputs);

    // Mid-run, the API stops taking the old key; the new key reaches the key file 5 s later.
    await eventually(() => (simulator().deliveries.length >= 60 ? true : undefined), {
      timeoutMs: 30_000,
      what: '60 deliveries',
    });
    simulator().setApiKey(NEW_KEY);
    const rotatedAt = Date.now();
    const base_ = `http://127.0.0.1:${port}`;
    const paused = await eventually(
      async () => {
        const res = await fetch(`${base_}/readyz`);
        const body = (await res.json()) as { checks: Record<string, string> };
        return res.status === 503 && body.checks['auth']?.startsWith('paused') ? body : undefined;
      },
      { timeoutMs: 5_000, what: '/readyz to report the pause' },
    );
    expect(paused.checks['auth']).toMatch(/401/);
    expect(await metricValue(base_)).toBe(1);
    await new Promise((r) => setTimeout(r, 5_000 - (Date.now() - rotatedAt)));
    writeKey(NEW_KEY);
    const fixedAt = Date.now();

    const events = await fleet().events(200, 60_000);
    const firstAfterFix = Math.min(
      ...simulator()
        .deliveries.filter((d) => d.at >= fixedAt)
        .map((d) => d.at),
    );
    console.log(
      `key rejected at +0 ms, key file fixed at +${fixedAt - rotatedAt} ms, sending again ${firstAfterFix - fixedAt} ms later`,
    );
    expect(firstAfterFix - fixedAt).toBeLessThan(30_000);

    const deliveries = simulator().deliveries;
    expect(deliveries.map((d) => d.prompt).sort()).toEqual(inputs.map((i) => i.prompt).sort());
    expect(duplicates(deliveries.map((d) => d.prompt))).toEqual([]);
    for (let p = 0; p < 4; p++)
      for (let j = 0; j < 5; j++)
        expect(roundsOf(deliveries, `p${p}`, `j${j}`)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(events).toHaveLength(200);
    expect(events.filter((e) => e.type !== 'followup.completed')).toEqual([]);
    // The API did reject the old key meanwhile (sends or status reads): the pause was real.
    const rejected = simulator().requests.filter((r) => r.status === 401);
    console.log(
      `401 answers: ${rejected.filter((r) => r.kind === 'send').length} sends, ${rejected.filter((r) => r.kind === 'get').length} status reads`,
    );
    expect(rejected.length).toBeGreaterThan(0);

    await eventually(async () => ((await metricValue(base_)) === 0 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the pause gauge back to 0',
    });
    expect((await fetch(`${base_}/readyz`)).status).toBe(200);
    await stopAll(fleet().processes);

    const lines = fleet().processes.flatMap((p) => logLines(p.output.stdout));
    const pausedLines = lines.filter((l) => l['msg'] === 'sends:paused');
    expect(pausedLines).toHaveLength(1);
    expect(pausedLines[0]).toMatchObject({ level: 50, httpStatus: 401 });
    expect(lines.filter((l) => l['msg'] === 'sends:resumed').length).toBeGreaterThanOrEqual(1);

    const haystack = new Haystack([
      { name: 'old key', value: TEST_API_KEY },
      { name: 'new key', value: NEW_KEY },
    ]);
    fleet().processes.forEach((p, i) => haystack.addOutput(`process ${i}`, p.output));
    await addRedis(haystack, ns.redis, `${ns.prefix}*`);
    expect((haystack.places.get('log lines') ?? 0) > 200).toBe(true);
    expect(haystack.places.get('Redis keys and values')).toBeGreaterThan(200);
    expect(haystack.leaks).toEqual([]);
  }, 90_000);

  it('without a poller, the workers probe by themselves, refund every rejected send and resume', async () => {
    const { ns, producer } = fleet();
    writeKey(TEST_API_KEY);
    simulator().setApiKey(NEW_KEY);
    const { AGENT_API_KEY: _fromEnv, ...base } = fleetEnv(ns, simulator(), {
      // A long window: the budget log keeps every entry for the refund check below.
      SEND_RATE_LIMIT: '100000/1h',
    });
    fleet().processes = startRoles('worker', 2, { ...base, AGENT_API_KEY_FILE: keyFile });
    const inputs = grid(simulator(), 1, 6, 1);
    await producer.sendMany(inputs);
    const keys = keysFor(ns.prefix);
    await eventually(async () => ((await ns.redis.exists(keys.authPause)) ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the pause',
    });
    // Let probes fail with the old key before the file gets the new one: the first sends (up to
    // 6) were rejected, then one probe at a time (1 s after the pause began, then 2 s later...).
    await new Promise((r) => setTimeout(r, 4_000));
    const rejected = simulator().requests.filter((r) => r.kind === 'send' && r.status === 401);
    expect(rejected.length).toBeGreaterThanOrEqual(1 + 2);
    expect(rejected.length).toBeLessThanOrEqual(6 + 3);
    expect(simulator().deliveries).toHaveLength(0);
    writeKey(NEW_KEY);
    const fixedAt = Date.now();
    await eventually(() => (simulator().deliveries.length === 6 ? true : undefined), {
      timeoutMs: 35_000,
      what: '6 deliveries',
    });
    const resumedAfterMs = Math.min(...simulator().deliveries.map((d) => d.at)) - fixedAt;
    console.log(
      `${rejected.length} sends rejected (first sends, then probes) in 4 s; sending again ${resumedAfterMs} ms after the key file was fixed`,
    );
    expect(resumedAfterMs).toBeLessThan(30_000);
    expect(await ns.redis.exists(keys.authPause)).toBe(0);
    // Every rejected send gave its budget unit back: the log holds the 6 delivered sends only.
    expect(await ns.redis.zcard(keys.budget('p0'))).toBe(6);
    expect(await readEvents(ns.redis, ns.eventsStream)).toEqual([]);
    const lines = fleet().processes.flatMap((p) => logLines(p.output.stdout));
    expect(lines.filter((l) => l['msg'] === 'sends:paused')).toHaveLength(1);
  }, 90_000);
});

/** The value of `agent_dispatch_api_auth_paused` on a process's metrics endpoint. */
async function metricValue(base: string): Promise<number | undefined> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const match = /^agent_dispatch_api_auth_paused\{shard="0"\} (\d+)$/m.exec(text);
  return match ? Number(match[1]) : undefined;
}
