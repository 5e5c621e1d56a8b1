import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { METRIC_NAMES, WEBHOOK_NAMES } from '../../src/telemetry/names.js';
import { webhookMetrics } from '../../src/webhooks/metrics.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestServer } from '../http/fixture.js';
import { parseExposition } from '../telemetry/exposition.js';

const run = promisify(execFile);
const RULES = 'deploy/prometheus/alerts.yml';
const RULE_TESTS = 'deploy/prometheus/alerts.test.yml';
const DASHBOARD = 'deploy/grafana/agent-dispatch.json';

/** Runs promtool, failing loudly (never skipping) when Debian's `prometheus` package is missing. */
async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args);
    return stdout + stderr;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error(
        'promtool is not installed: apt-get install -y prometheus (README, prerequisites)',
      );
    }
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

/** Every `agent_dispatch_*` metric family a PromQL expression names (histogram suffixes dropped). */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\bagent_dispatch_[a-z_]+/g)].map(([name]) =>
    name.replace(/_(bucket|sum|count)$/, ''),
  );
}

interface Panel {
  title: string;
  type: string;
  datasource?: { uid?: string };
  targets?: { expr: string; datasource?: { uid?: string } }[];
}

describe('deploy/: the Grafana dashboard and the Prometheus alert rules', () => {
  const served = useTestServer('deploy');
  let exposed: Set<string>;
  beforeAll(async () => {
    const metrics = await fetch(`${served.app.url}/metrics`);
    exposed = new Set(parseExposition(await metrics.text()).keys());
    // The webhook metrics are the deliverer's (poller, start), not the HTTP server's.
    const deliverer = new Registry();
    webhookMetrics(deliverer);
    for (const metric of await deliverer.getMetricsAsJSON()) exposed.add(metric.name);
  });

  it('has alert rules that promtool accepts, and whose unit tests pass', async () => {
    expect(await promtool('check', 'rules', RULES)).toMatch(/SUCCESS: 12 rules found/);
    expect(await promtool('test', 'rules', RULE_TESTS)).toMatch(/SUCCESS/);
  });

  it('names in its alert rules only metrics that /metrics exposes', async () => {
    const rules = await readFile(RULES, 'utf8');
    const exprs = [...rules.matchAll(/expr: (>-\n(?:\s{10}.*\n)+|.*)/g)].map(([, e]) => e ?? '');
    expect(exprs).toHaveLength(12);
    const named = new Set(exprs.flatMap(metricsIn));
    expect([...named].filter((name) => !exposed.has(name))).toEqual([]);
    expect(named.size).toBeGreaterThanOrEqual(6);
  });

  it('is an importable dashboard whose every panel queries metrics that /metrics exposes', async () => {
    const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as {
      __inputs: { name: string; type: string }[];
      panels: Panel[];
    };
    expect(dashboard.__inputs).toEqual([
      expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource' }),
    ]);
    const panels = dashboard.panels;
    expect(panels.length).toBeGreaterThanOrEqual(10);
    for (const panel of panels) {
      expect(panel.datasource?.uid, panel.title).toBe('${DS_PROMETHEUS}');
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        const names = metricsIn(target.expr);
        expect(names.length, `${panel.title}: ${target.expr}`).toBeGreaterThan(0);
        expect(
          names.filter((name) => !exposed.has(name)),
          `${panel.title}: ${target.expr}`,
        ).toEqual([]);
      }
    }
    // What the issue asks the dashboard to show, by the metric that shows it.
    const all = panels.flatMap((p) => (p.targets ?? []).flatMap((t) => metricsIn(t.expr)));
    for (const needed of [
      'agent_dispatch_sends_total',
      'agent_dispatch_project_sends_total',
      'agent_dispatch_project_parked_until_timestamp_seconds',
      'agent_dispatch_worker_inflight',
      'agent_dispatch_worker_inflight_limit',
      'agent_dispatch_poll_lag_seconds',
      'agent_dispatch_events_published_total',
      'agent_dispatch_queue_jobs',
      'agent_dispatch_oldest_queued_age_seconds',
      'agent_dispatch_run_end_to_event_seconds',
      'agent_dispatch_project_send_limit_max',
      'agent_dispatch_project_send_limit_window_seconds',
    ]) {
      expect(all, needed).toContain(needed);
    }
  });

  it('names in its panels only metrics that src/telemetry/names.ts defines', async () => {
    const defined = new Set<string>([
      ...Object.values(METRIC_NAMES),
      WEBHOOK_NAMES.deliveriesMetric,
      WEBHOOK_NAMES.oldestMetric,
    ]);
    const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: Panel[] };
    const named = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).flatMap((t) => metricsIn(t.expr)),
    );
    expect(named.length).toBeGreaterThan(15);
    expect([...new Set(named)].filter((name) => !defined.has(name))).toEqual([]);
  });

  it("divides each project's sends by its own limit, else by SEND_RATE_LIMIT (promtool)", async () => {
    const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: Panel[] };
    const panel = dashboard.panels.find((p) => p.title === 'Budget use per project');
    const expr = panel?.targets?.[0]?.expr.replaceAll('$window', '1h') ?? '';
    // Two workers count sends; a poller and a worker both export the limit gauges.
    const series = {
      'agent_dispatch_project_sends_total{project="small",instance="w1"}': '0+0.1x180',
      'agent_dispatch_project_sends_total{project="small",instance="w2"}': '0+0.1x180',
      'agent_dispatch_project_sends_total{project="big",instance="w1"}': '0+1x180',
      'agent_dispatch_project_send_limit_max{project="small",shard="0",instance="w1"}': '2x180',
      'agent_dispatch_project_send_limit_max{project="small",shard="0",instance="p1"}': '2x180',
      'agent_dispatch_project_send_limit_window_seconds{project="small",shard="0",instance="w1"}':
        '600x180',
      'agent_dispatch_send_rate_limit_max{instance="w1"}': '100x180',
      'agent_dispatch_send_rate_limit_window_seconds{instance="w1"}': '3600x180',
    };
    // 2 sends per 10 minutes against its own 2/10m: all of it; 60 an hour against 100/1h: 60 %.
    const test = {
      tests: [
        {
          interval: '1m',
          input_series: Object.entries(series).map(([name, values]) => ({ series: name, values })),
          promql_expr_test: [
            {
              // Rounded: rate's float arithmetic gives 0.9999999999999964 for the whole budget.
              expr: `round(${expr}, 0.001)`,
              eval_time: '2h',
              exp_samples: [
                { labels: '{project="small"}', value: 1 },
                { labels: '{project="big"}', value: 0.6 },
              ],
            },
          ],
        },
      ],
    };
    const dir = await mkdtemp(join(tmpdir(), 'dashboard-'));
    try {
      await writeFile(join(dir, 'budget.test.yml'), JSON.stringify(test));
      expect(await promtool('test', 'rules', join(dir, 'budget.test.yml'))).toMatch(/SUCCESS/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
