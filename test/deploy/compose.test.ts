import { execFile, spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);

/** The settings `docker-compose.yml` requires, with values the checks below look for. */
const SECRETS = {
  REDIS_PASSWORD: 'redis-pw-4f1c9a',
  GRAFANA_ADMIN_PASSWORD: 'grafana-pw-77d0',
  AGENT_API_KEY: 'mint-key-9e2b61',
};

interface Service {
  image?: string;
  build?: unknown;
  environment?: Record<string, string>;
  ports?: string[];
  command?: string[];
  entrypoint?: string[];
  volumes?: string[];
}

/**
 * `docker-compose config` (Debian's `docker-compose`: scripts/prerequisites.sh installs it) with
 * `env` on top of PATH and HOME: the services as Compose reads them, variables resolved.
 */
async function composeConfig(env: Record<string, string>): Promise<Record<string, Service>> {
  const base = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' };
  let yaml: string;
  try {
    yaml = (await run('docker-compose', ['config'], { env: { ...base, ...env } })).stdout;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error('docker-compose is not installed: scripts/prerequisites.sh installs it');
    throw err;
  }
  return (readYaml(yaml) as { services: Record<string, Service> }).services;
}

/** YAML as JSON, by the parser Debian's docker-compose depends on (python3-yaml). */
function readYaml(text: string): unknown {
  const parsed = spawnSync(
    'python3',
    ['-c', 'import sys, json, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)'],
    { input: text, encoding: 'utf8' },
  );
  if (parsed.status !== 0) throw new Error(`could not read YAML: ${parsed.stderr}`);
  return JSON.parse(parsed.stdout);
}

describe('docker-compose.yml', () => {
  let services: Record<string, Service>;
  beforeAll(async () => {
    services = await composeConfig(SECRETS);
  });

  it('pins every image it pulls, and runs Prometheus and Grafana beside the fleet', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining(['redis', 'worker', 'poller', 'serve', 'prometheus', 'grafana']),
    );
    for (const [name, service] of Object.entries(services)) {
      if (service.build) continue;
      expect(service.image, name).toMatch(/:v?\d+\.\d+\.\d+$/);
    }
  });

  it('hands the API key only to the roles that call the API', () => {
    const holders = Object.entries(services)
      .filter(([, s]) => JSON.stringify(s).includes(SECRETS.AGENT_API_KEY))
      .map(([name]) => name);
    expect(holders.sort()).toEqual(['poller', 'worker']);
  });

  it('binds every published port to 127.0.0.1, unless BIND_ADDRESS says otherwise', async () => {
    const ports = Object.values(services).flatMap((s) => s.ports ?? []);
    expect(ports.length).toBeGreaterThanOrEqual(4);
    for (const port of ports) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+/);
    const open = await composeConfig({ ...SECRETS, BIND_ADDRESS: '0.0.0.0' });
    for (const port of Object.values(open).flatMap((s) => s.ports ?? []))
      expect(port).toMatch(/^0\.0\.0\.0:/);
  });

  it('gives Redis a password that every role uses and no command line shows', () => {
    const redis = services['redis'];
    expect(redis?.environment?.['REDISCLI_AUTH']).toBe(SECRETS.REDIS_PASSWORD);
    expect(redis?.entrypoint?.join(' ')).toContain('requirepass');
    for (const [name, service] of Object.entries(services)) {
      const url = service.environment?.['REDIS_URL'];
      if (url !== undefined)
        expect(url, name).toBe(`redis://:${SECRETS.REDIS_PASSWORD}@redis:6379`);
      const argv = [...(service.entrypoint ?? []), ...(service.command ?? [])].join(' ');
      expect(argv, name).not.toContain(SECRETS.REDIS_PASSWORD);
    }
  });

  it('refuses to start without a Redis password, naming REDIS_PASSWORD', async () => {
    const { REDIS_PASSWORD: _password, ...rest } = SECRETS;
    await expect(composeConfig(rest)).rejects.toThrow(/set REDIS_PASSWORD/);
  });

  it('provisions Grafana so that it shows the dashboard at once, on the Prometheus it runs', async () => {
    const grafana = services['grafana'];
    const volumes = grafana?.volumes ?? [];
    expect(volumes.join('\n')).toMatch(
      /deploy\/grafana\/provisioning:\/etc\/grafana\/provisioning:ro/,
    );
    const mounted = /deploy\/grafana\/agent-dispatch\.json:(\S+):ro/.exec(volumes.join('\n'))?.[1];
    // The entrypoint puts the provisioned datasource's uid in the importable dashboard's place.
    const raw = readYaml(await readFile('docker-compose.yml', 'utf8')) as {
      services: Record<string, Service>;
    };
    const entrypoint = raw.services['grafana']?.entrypoint?.join(' ') ?? '';
    const sed = /sed 's\/\$\$\{DS_PROMETHEUS\}\/(\w+)\/g' (\S+)\s*>\s*(\S+)/.exec(entrypoint);
    const [, uid = '', from, to = ''] = sed ?? [];
    expect(from).toBe(mounted);
    const datasources = readYaml(
      await readFile('deploy/grafana/provisioning/datasources/prometheus.yml', 'utf8'),
    ) as { datasources: { uid: string; type: string; url: string }[] };
    expect(datasources.datasources).toEqual([
      expect.objectContaining({ uid, type: 'prometheus', url: 'http://prometheus:9090' }),
    ]);
    expect(services['prometheus']?.command?.join(' ')).toMatch(/--config\.file=/);
    const providers = readYaml(
      await readFile('deploy/grafana/provisioning/dashboards/agent-dispatch.yml', 'utf8'),
    ) as { providers: { type: string; options: { path: string } }[] };
    expect(providers.providers).toEqual([
      expect.objectContaining({
        type: 'file',
        options: { path: to.slice(0, to.lastIndexOf('/')) },
      }),
    ]);
    // The copy Grafana loads: every panel on the provisioned datasource, no input left to fill.
    const copy = (await readFile('deploy/grafana/agent-dispatch.json', 'utf8')).replaceAll(
      '${DS_PROMETHEUS}',
      uid,
    );
    const panels = (JSON.parse(copy) as { panels: { datasource: { uid: string } }[] }).panels;
    expect(new Set(panels.map((p) => p.datasource.uid))).toEqual(new Set([uid]));
    expect(copy).not.toMatch(/\$\{/);
  });

  it('scrapes every replica of each role by DNS, on the ports the roles listen on', async () => {
    const prometheus = services['prometheus'];
    expect(prometheus?.volumes?.join('\n')).toMatch(/deploy\/prometheus\/prometheus\.yml:/);
    expect(String(services['worker']?.environment?.['METRICS_PORT'])).toBe('9464');
    expect(String(services['poller']?.environment?.['METRICS_PORT'])).toBe('9464');
    expect(services['serve']?.environment?.['HTTP_PORT']).toBe('3000');
    const { stdout } = await run('promtool', [
      'check',
      'config',
      'deploy/prometheus/prometheus.yml',
    ]);
    expect(stdout).toMatch(/SUCCESS: 1 rule files found/);
    const config = readYaml(await readFile('deploy/prometheus/prometheus.yml', 'utf8')) as {
      scrape_configs: { dns_sd_configs: { names: string[]; type: string; port: number }[] }[];
    };
    const jobs = config.scrape_configs.flatMap((job) => job.dns_sd_configs);
    expect(jobs).toEqual([
      expect.objectContaining({ names: ['serve'], type: 'A', port: 3000 }),
      expect.objectContaining({ names: ['worker'], type: 'A', port: 9464 }),
      expect.objectContaining({ names: ['poller'], type: 'A', port: 9464 }),
    ]);
  });
});
