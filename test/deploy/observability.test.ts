import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
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
    ]) {
      expect(all, needed).toContain(needed);
    }
  });
});
