import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis-server.js';

/**
 * A real Prometheus server (Debian's `prometheus` package, the one that brings `promtool`) on
 * 127.0.0.1, with its storage in a temporary folder: it scrapes given targets and evaluates the
 * project's alert rules, so a test can watch an alert reach `firing` in `/api/v1/alerts`.
 */

/** An alert as `GET /api/v1/alerts` lists it. */
export interface PrometheusAlert {
  readonly labels: Record<string, string>;
  readonly state: 'pending' | 'firing' | 'inactive';
}

/** A running Prometheus; `stop` ends it and removes its folder. */
export interface Prometheus {
  readonly url: string;
  /** Everything it logged, for a failing test's message. */
  readonly log: () => string;
  alerts(): Promise<PrometheusAlert[]>;
  /** The value of each series an instant query answers, by its labels as JSON. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: number }[]>;
  stop(): Promise<void>;
}

/** What to start it with. */
export interface PrometheusOptions {
  /** `host:port` of each target to scrape at `/metrics`. */
  readonly targets: readonly string[];
  /** A rules file to load, copied (with `rewrite` applied) into the server's folder. */
  readonly rulesFile: string;
  /** Changes to the rules' text before loading, e.g. shorter `for:` durations. */
  readonly rewrite?: (rules: string) => string;
  /** Scrape and rule evaluation interval. @defaultValue '1s' */
  readonly interval?: string;
}

/** Starts Prometheus; fails loudly (never skips) when the binary is missing. */
export async function startPrometheus(options: PrometheusOptions): Promise<Prometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'prometheus-'));
  const interval = options.interval ?? '1s';
  const rules = readFileSync(options.rulesFile, 'utf8');
  writeFileSync(join(dir, 'rules.yml'), options.rewrite ? options.rewrite(rules) : rules);
  const targets = options.targets.map((t) => `'${t}'`).join(', ');
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global:',
      `  scrape_interval: ${interval}`,
      `  evaluation_interval: ${interval}`,
      'rule_files: [rules.yml]',
      'scrape_configs:',
      '  - job_name: agent-dispatch',
      `    static_configs: [{ targets: [${targets}] }]`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const child = spawnPrometheus(dir, port);
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  let failure: Error | undefined;
  child.once('error', (err: NodeJS.ErrnoException) => {
    failure =
      err.code === 'ENOENT'
        ? new Error('prometheus is not installed: apt-get install -y prometheus (prerequisites)')
        : err;
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  try {
    await untilReady(url, () => failure ?? (child.exitCode !== null ? new Error(log) : undefined));
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.error ?? ''}`);
    return body.data;
  };
  return {
    url,
    log: () => log,
    alerts: async () => (await api<{ alerts: PrometheusAlert[] }>('/api/v1/alerts')).alerts,
    async query(expr) {
      const data = await api<{
        result: { metric: Record<string, string>; value: [number, string] }[];
      }>(`/api/v1/query?query=${encodeURIComponent(expr)}`);
      return data.result.map(({ metric, value }) => ({ metric, value: Number(value[1]) }));
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function spawnPrometheus(dir: string, port: number): ChildProcess {
  const child = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return child;
}

/** Waits for `/-/ready`, failing at once with what `failed` says went wrong (it exited). */
async function untilReady(url: string, failed: () => Error | undefined): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const error = failed();
    if (error) throw new Error(`prometheus did not start: ${error.message}`);
    const res = await fetch(`${url}/-/ready`).catch(() => undefined);
    if (res?.status === 200) return;
    if (Date.now() > deadline) throw new Error('prometheus was not ready within 20 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}
