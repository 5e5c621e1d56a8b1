import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { runCli, runCliToEnd } from '../support/cli.js';
import { fleetEnv, useFleet } from '../support/fleet.js';
import { createNamespace, eventually } from '../support/namespace.js';
import { startPrometheus, type Prometheus, type PrometheusAlert } from '../support/prometheus.js';
import { freePort, startPrivateRedis } from '../support/redis-server.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

const RULES = 'deploy/prometheus/alerts.yml';

/**
 * The rules as shipped, but each `for:` cut to 2 s, and the thresholds of the alerts on ages (a
 * follow-up waiting 10 minutes, a project paused 4 hours, a webhook undelivered 15 minutes) cut to
 * a few seconds: the test proves that the expressions see a real fleet's metrics, not how long an
 * operator waits before being paged. A threshold no longer found in the file fails the test.
 */
const THRESHOLDS: readonly (readonly [string, string])[] = [
  [
    '(agent_dispatch_oldest_queued_age_seconds) > 600',
    '(agent_dispatch_oldest_queued_age_seconds) > 3',
  ],
  [
    '(agent_dispatch_project_paused_since_timestamp_seconds) > 14400',
    '(agent_dispatch_project_paused_since_timestamp_seconds) > 2',
  ],
  [
    '(agent_dispatch_webhook_oldest_undelivered_seconds) > 900',
    '(agent_dispatch_webhook_oldest_undelivered_seconds) > 3',
  ],
  ['max(agent_dispatch_poll_lag_seconds) > 60', 'max(agent_dispatch_poll_lag_seconds) > 3'],
];

/** Every `for:` line of the rules, and the ones {@link shortRules} cuts. */
const FOR_LINE = /^\s+for:/gm;
const SHIPPED_FOR = /^(\s+for:) \d+[smh]$/gm;

function shortRules(rules: string): string {
  let text = rules.replace(SHIPPED_FOR, '$1 2s');
  for (const [shipped, short] of THRESHOLDS) {
    if (!text.includes(shipped)) throw new Error(`alerts.yml no longer says "${shipped}"`);
    text = text.replace(shipped, short);
  }
  return text;
}

/** The alerts the first test makes fire by killing every worker and the poller. */
const ON_KILL = [
  'AgentDispatchNoWorkerAlive',
  'AgentDispatchNoPollerAlive',
  'AgentDispatchFollowupsWaiting',
];

/** The alerts of the first test, none firing before it breaks the fleet. */
const COVERED = [
  'AgentDispatchSendsPausedAuth',
  'AgentDispatchProjectPausedLong',
  'AgentDispatchProjectParkedLong',
  'AgentDispatchUndeliverableRate',
  'AgentDispatchWebhooksUndelivered',
  ...ON_KILL,
];

/** The alerts of the second test: a sent follow-up that no poller reads, then Redis, then serve. */
const SECOND = [
  'AgentDispatchEventsStalled',
  'AgentDispatchPollLagging',
  'AgentDispatchRedisDown',
  'AgentDispatchHeartbeatsMissing',
];

/** The alerts that Prometheus shows firing, by name. */
async function firingNow(prom: Prometheus): Promise<Map<string, PrometheusAlert>> {
  const firing = (await prom.alerts()).filter((a) => a.state === 'firing');
  return new Map(firing.map((a) => [a.labels['alertname'] ?? '', a]));
}

/** Waits until `name` fires; resolves with the alert and the seconds since `since`. */
async function untilFiring(
  prom: Prometheus,
  name: string,
  since: number,
  timeoutMs = 60_000,
): Promise<{ alert: PrometheusAlert; seconds: number }> {
  const alert = await eventually(async () => (await firingNow(prom)).get(name), {
    timeoutMs,
    intervalMs: 250,
    what: `${name} to fire (prometheus log: ${prom.log()})`,
  });
  return { alert, seconds: (Date.now() - since) / 1000 };
}

/** Waits until the instant query `expr` answers `value`. */
async function untilSeen(prom: Prometheus, expr: string, value: number): Promise<void> {
  await eventually(async () => ((await prom.query(expr))[0]?.value === value ? true : undefined), {
    timeoutMs: 30_000,
    intervalMs: 250,
    what: `Prometheus to see ${expr} == ${value} (log: ${prom.log()})`,
  });
}

/** Seconds to firing of each alert, for a reader who runs the file with ALERT_TIMES=1. */
function noteTimes(times: Record<string, number>): void {
  if (process.env['ALERT_TIMES'] !== undefined) console.log(JSON.stringify(times));
}

describe('deploy/prometheus/alerts.yml against a real fleet scraped by a real Prometheus', () => {
  // An agent job of project `slow` runs for 10 minutes: its follow-up stays tracked.
  const simulator = useSimulator({ workTimeMs: (p) => (p === 'slow' ? 600_000 : 200) });
  const fleet = useFleet('alerts-fire', simulator);
  let prometheus: Prometheus | undefined;
  afterEach(async () => {
    await prometheus?.stop();
    prometheus = undefined;
  });

  it('fires the alerts on a paused project, undelivered webhooks, a rejected key, a parked project, undeliverable follow-ups, then no worker, no poller and waiting follow-ups', async () => {
    const { ns, producer } = fleet();
    const [port, pollerPort, refused] = [await freePort(), await freePort(), await freePort()];
    // Each worker is scraped too: parks and undeliverable sends are counted where they happen.
    const workerPorts = [await freePort(), await freePort()];
    const env = fleetEnv(ns, simulator(), { HTTP_PORT: String(port) });
    // An endpoint nothing listens on: every delivery is refused and retried.
    const hook = await runCliToEnd(['webhook', 'add', `http://127.0.0.1:${refused}/hook`], env);
    expect(hook.code).toBe(0);
    const serve = runCli(['serve'], env);
    const workers = workerPorts.flatMap((p) =>
      startRoles('worker', 1, { ...env, METRICS_PORT: String(p) }),
    );
    const pollers = startRoles('poller', 1, { ...env, METRICS_PORT: String(pollerPort) });
    fleet().processes = [serve, ...workers, ...pollers];
    // Four processes start at once: on a busy machine that takes longer than one would.
    await waitForWorkers(ns, 2, { processes: workers, timeoutMs: 60_000 });
    await waitForWorkers(ns, 1, { queue: QUEUE_NAMES.poll, processes: pollers, timeoutMs: 60_000 });
    prometheus = await startPrometheus({
      targets: [port, pollerPort, ...workerPorts].map((p) => `127.0.0.1:${p}`),
      rulesFile: RULES,
      rewrite: shortRules,
    });
    const prom = prometheus;
    // Both workers' and the poller's heartbeats reach Prometheus through the scrape of `serve`.
    await untilSeen(prom, 'max(agent_dispatch_live_processes{role="worker"})', 2);
    await untilSeen(prom, 'max(agent_dispatch_live_processes{role="poller"})', 1);
    await untilSeen(prom, 'max(agent_dispatch_webhook_oldest_undelivered_seconds)', 0);
    await untilSeen(prom, 'min(agent_dispatch_redis_up)', 1);
    const before = await firingNow(prom);
    for (const name of COVERED) expect(before.get(name), name).toBeUndefined();

    const times: Record<string, number> = {};
    // An operator's pause; a completed follow-up whose event nobody can take; a rotated key.
    const paused = await runCliToEnd(['project', 'pause', 'held'], env);
    expect(paused.code).toBe(0);
    const pausedAt = Date.now();
    simulator().seedJob('p1', 'j1');
    await producer.send({ projectId: 'p1', jobId: 'j1', prompt: 'its event is refused' });
    await fleet().events(1, 20_000);
    const publishedAt = Date.now();
    const parked = untilFiring(prom, 'AgentDispatchProjectPausedLong', pausedAt);
    const hooks = untilFiring(prom, 'AgentDispatchWebhooksUndelivered', publishedAt);
    // The agent API answers 429 to every send of one project for 10 minutes: the worker parks it.
    simulator().rateLimitProject('busy', Date.now() + 600_000, { retryAfter: true });
    simulator().seedJob('busy', 'j1');
    const limitedAt = Date.now();
    await producer.send({ projectId: 'busy', jobId: 'j1', prompt: 'answered 429' });
    const limited = untilFiring(prom, 'AgentDispatchProjectParkedLong', limitedAt);
    // Follow-ups to agent jobs that do not exist end undeliverable (not_found). A rate needs a
    // series that grows between two scrapes: each is sent once Prometheus saw the one before, and
    // of three, one of the two workers sends two.
    const undeliverable =
      'sum(agent_dispatch_events_published_total{type="followup.undeliverable"})';
    const strayAt = Date.now();
    for (const n of [1, 2, 3]) {
      await producer.send({ projectId: 'p4', jobId: `gone-${n}`, prompt: 'no such job' });
      await untilSeen(prom, undeliverable, n);
    }
    const stray = untilFiring(prom, 'AgentDispatchUndeliverableRate', strayAt);
    simulator().setApiKey('a-rotated-key-0123456789');
    simulator().seedJob('p2', 'j1');
    const rotatedAt = Date.now();
    await producer.send({ projectId: 'p2', jobId: 'j1', prompt: 'the key is refused' });
    const auth = await untilFiring(prom, 'AgentDispatchSendsPausedAuth', rotatedAt);
    expect(auth.alert.labels).toMatchObject({ severity: 'critical', shard: '0' });
    const project = await parked;
    expect(project.alert.labels).toMatchObject({ severity: 'warning', project: 'held' });
    const webhooks = await hooks;
    expect(webhooks.alert.labels).toMatchObject({ severity: 'warning' });
    const busy = await limited;
    expect(busy.alert.labels).toMatchObject({ severity: 'warning', project: 'busy' });
    const rate = await stray;
    expect(rate.alert.labels).toMatchObject({ severity: 'warning' });
    Object.assign(times, {
      AgentDispatchSendsPausedAuth: auth.seconds,
      AgentDispatchProjectPausedLong: project.seconds,
      AgentDispatchWebhooksUndelivered: webhooks.seconds,
      AgentDispatchProjectParkedLong: busy.seconds,
      AgentDispatchUndeliverableRate: rate.seconds,
    });

    // Right before the kill, what it is to cause does not fire yet.
    const beforeKill = await firingNow(prom);
    for (const name of ON_KILL) expect(beforeKill.get(name), name).toBeUndefined();
    // Every worker and the poller die; a follow-up arrives that nobody takes.
    for (const p of [...workers, ...pollers]) p.child.kill('SIGKILL');
    await Promise.all([...workers, ...pollers].map((p) => p.exited));
    fleet().processes = [serve];
    const killedAt = Date.now();
    simulator().seedJob('p3', 'j1');
    await producer.send({ projectId: 'p3', jobId: 'j1', prompt: 'nobody sends this' });
    const [noWorker, noPoller, waiting] = await Promise.all([
      untilFiring(prom, 'AgentDispatchNoWorkerAlive', killedAt),
      untilFiring(prom, 'AgentDispatchNoPollerAlive', killedAt),
      untilFiring(prom, 'AgentDispatchFollowupsWaiting', killedAt),
    ]);
    expect(noWorker.alert.labels).toMatchObject({ severity: 'critical', shard: '0' });
    expect(noPoller.alert.labels).toMatchObject({ severity: 'critical', shard: '0' });
    expect(waiting.alert.labels).toMatchObject({ severity: 'warning', shard: '0' });
    Object.assign(times, {
      AgentDispatchNoWorkerAlive: noWorker.seconds,
      AgentDispatchNoPollerAlive: noPoller.seconds,
      AgentDispatchFollowupsWaiting: waiting.seconds,
    });
    noteTimes(times);
  }, 240_000);

  it('cuts every `for:` of the rules, and names every alert of the file among those the tests fire', () => {
    const rules = readFileSync(RULES, 'utf8');
    const forLines = rules.match(FOR_LINE)?.length ?? 0;
    expect(forLines).toBeGreaterThan(0);
    expect(rules.match(SHIPPED_FOR)?.length).toBe(forLines);
    expect(shortRules(rules).match(/^\s+for: 2s$/gm)?.length).toBe(forLines);
    const alerts = [...rules.matchAll(/^\s+- alert: (\w+)$/gm)].map((m) => m[1]);
    // Every alert of the file fires in one of the tests below.
    expect(alerts.filter((a) => ![...COVERED, ...SECOND].includes(a as string))).toEqual([]);
  });

  it('fires the alerts on a sent follow-up no poller reads, on a killed redis-server, then on serve stopped', async () => {
    const server = await startPrivateRedis();
    const ns = createNamespace('alerts-redis', server.url);
    // Its client retries while the server is down, on purpose.
    ns.redis.on('error', () => {});
    const port = await freePort();
    const env = fleetEnv(ns, simulator(), { HTTP_PORT: String(port) });
    const serve = runCli(['serve'], env);
    // The first test rotated the simulator's key: the fleet's works again.
    simulator().setApiKey(TEST_API_KEY);
    // A worker and no poller: what is sent stays tracked, and no event is published.
    const workers = startRoles('worker', 1, env);
    const producer = createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix });
    try {
      await waitForWorkers(ns, 1, { processes: workers, timeoutMs: 60_000 });
      // A scrape waits up to 2 s for a Redis that does not answer: the scrape interval (and so
      // its timeout) is longer, or Prometheus would see the target down instead of redis_up 0.
      prometheus = await startPrometheus({
        targets: [`127.0.0.1:${port}`],
        rulesFile: RULES,
        rewrite: shortRules,
        interval: '4s',
      });
      const prom = prometheus;
      await untilSeen(prom, 'min(agent_dispatch_redis_up)', 1);
      // Until the first scrape, the heartbeat count is absent: HeartbeatsMissing may fire for a
      // moment, and must have stopped before anything breaks.
      await untilSeen(prom, 'max(agent_dispatch_live_processes{role="worker"})', 1);
      await eventually(
        async () => {
          const firing = await firingNow(prom);
          return SECOND.every((name) => !firing.has(name)) ? true : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 250, what: `none of ${SECOND.join(', ')} firing` },
      );
      simulator().seedJob('slow', 'j1');
      const sentAt = Date.now();
      await producer.send({ projectId: 'slow', jobId: 'j1', prompt: 'runs for 10 minutes' });
      const [stalled, lagging] = await Promise.all([
        untilFiring(prom, 'AgentDispatchEventsStalled', sentAt),
        untilFiring(prom, 'AgentDispatchPollLagging', sentAt),
      ]);
      expect(stalled.alert.labels).toMatchObject({ severity: 'warning' });
      expect(lagging.alert.labels).toMatchObject({ severity: 'warning' });
      noteTimes({
        AgentDispatchEventsStalled: stalled.seconds,
        AgentDispatchPollLagging: lagging.seconds,
      });
      for (const w of workers) await w.stop('SIGTERM');
      await server.stop('SIGKILL');
      const down = await untilFiring(prom, 'AgentDispatchRedisDown', Date.now());
      expect(down.alert.labels).toMatchObject({ severity: 'critical' });
      noteTimes({ AgentDispatchRedisDown: down.seconds });
      await server.restart();
      await untilSeen(prom, 'min(agent_dispatch_redis_up)', 1);
      expect((await firingNow(prom)).get('AgentDispatchHeartbeatsMissing')).toBeUndefined();
      // The one process that exports the heartbeat count stops: its series go stale.
      expect(await serve.stop('SIGTERM')).toBe(0);
      const missing = await untilFiring(prom, 'AgentDispatchHeartbeatsMissing', Date.now());
      expect(missing.alert.labels).toMatchObject({ severity: 'critical' });
      noteTimes({ AgentDispatchHeartbeatsMissing: missing.seconds });
    } finally {
      for (const w of workers) await w.stop('SIGKILL');
      await producer.close();
      await serve.stop('SIGTERM');
      await ns.cleanup();
      await server.destroy();
    }
  }, 150_000);
});
