import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { fleetEnv, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startPrometheus, type Prometheus } from '../support/prometheus.js';
import { freePort } from '../support/redis-server.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';

const RULES = 'deploy/prometheus/alerts.yml';

/**
 * The rules as shipped, but each `for:` cut to 2 s: the test proves that the expressions see a
 * real fleet's metrics, not how long an operator waits before being paged.
 */
const shortFor = (rules: string) => rules.replace(/^(\s+for:) \d+[smh]$/gm, '$1 2s');

describe('deploy/prometheus/alerts.yml against a real fleet scraped by a real Prometheus', () => {
  const simulator = useSimulator();
  const fleet = useFleet('alerts-fire', simulator);
  let prometheus: Prometheus | undefined;
  afterEach(async () => {
    await prometheus?.stop();
    prometheus = undefined;
  });

  it('fires AgentDispatchNoWorkerAlive once every worker is killed while follow-ups arrive', async () => {
    const { ns, producer } = fleet();
    const port = await freePort();
    const env = fleetEnv(ns, simulator(), { HTTP_PORT: String(port) });
    const serve = runCli(['serve'], env);
    const workers = startRoles('worker', 2, env);
    fleet().processes = [serve, ...workers];
    await waitForWorkers(ns, 2, { processes: workers });
    prometheus = await startPrometheus({
      targets: [`127.0.0.1:${port}`],
      rulesFile: RULES,
      rewrite: shortFor,
    });
    const prom = prometheus;
    const workersSeen = async () =>
      (await prom.query('max(agent_dispatch_live_processes{role="worker"})'))[0]?.value;
    // Both heartbeats reach Prometheus through the scrape of `serve`.
    await eventually(async () => ((await workersSeen()) === 2 ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 250,
      what: `Prometheus to count 2 live workers (log: ${prom.log()})`,
    });
    const firing = async (name: string) =>
      (await prom.alerts()).find((a) => a.labels['alertname'] === name && a.state === 'firing');
    expect(await firing('AgentDispatchNoWorkerAlive')).toBeUndefined();

    for (const worker of workers) worker.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    fleet().processes = [serve];
    simulator().seedJob('p1', 'j1');
    await producer.send({ projectId: 'p1', jobId: 'j1', prompt: 'nobody sends this' });

    const alert = await eventually(() => firing('AgentDispatchNoWorkerAlive'), {
      timeoutMs: 60_000,
      intervalMs: 500,
      what: 'AgentDispatchNoWorkerAlive to fire',
    });
    expect(alert.labels).toMatchObject({ severity: 'critical', shard: '0' });
    // The follow-up nobody takes shows as an ageing backlog.
    await eventually(
      async () => {
        const [age] = await prom.query('max(agent_dispatch_oldest_queued_age_seconds)');
        return age && age.value > 0 ? true : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 250, what: 'the oldest queued follow-up to age' },
    );
  }, 110_000);
});
