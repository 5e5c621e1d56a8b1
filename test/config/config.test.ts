import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  loadConfig,
  parseDurationMs,
  parseRate,
  type SettingName,
} from '../../src/config/index.js';
import { runCliToEnd } from '../support/cli.js';

describe('units', () => {
  it.each([
    ['250ms', 250],
    ['5s', 5_000],
    ['2m', 120_000],
    ['1h', 3_600_000],
    ['1.5s', 1_500],
    ['7d', 604_800_000],
  ])('parses the duration %s', (text, ms) => {
    expect(parseDurationMs(text)).toBe(ms);
  });

  it.each(['', '5', 's', '5 sec', '-1s', 'abc'])('rejects the duration %j', (text) => {
    expect(parseDurationMs(text)).toBeUndefined();
  });

  it('parses a rate and rejects malformed ones', () => {
    expect(parseRate('100/1h')).toEqual({ max: 100, windowMs: 3_600_000 });
    expect(parseRate('20/2s')).toEqual({ max: 20, windowMs: 2_000 });
    for (const bad of ['abc', '100', '0/1h', '10/0s', '1.5/1h', '/1h', '10/']) {
      expect(parseRate(bad), bad).toBeUndefined();
    }
  });
});

describe('loadConfig', () => {
  it('turns tracing on only for the exporters OTEL_TRACES_EXPORTER names', () => {
    expect(loadConfig({}).tracesExporters).toEqual([]);
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'none' }).tracesExporters).toEqual([]);
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp, console' }).tracesExporters).toEqual([
      'otlp',
      'console',
    ]);
    const problems = (env: Record<string, string>) =>
      (() => {
        try {
          loadConfig(env);
        } catch (err) {
          return (err as ConfigError).problems;
        }
        return [];
      })();
    expect(problems({ OTEL_TRACES_EXPORTER: 'otlp,jaeger' })).toEqual([
      {
        setting: 'OTEL_TRACES_EXPORTER',
        message: 'expected otlp, console, zipkin, none (comma-separated), got "jaeger"',
      },
    ]);
    expect(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http' })).toEqual([
      {
        setting: 'OTEL_EXPORTER_OTLP_PROTOCOL',
        message: 'expected one of http/protobuf, http/json, grpc',
      },
    ]);
  });

  it('applies the contract defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      agentApiUrl: 'https://api.mintlify.com',
      prefix: 'agent-dispatch',
      sendRateLimit: { max: 100, windowMs: 3_600_000 },
      pollIntervalMs: 5_000,
      eventsStream: 'agent-dispatch:events',
      httpPort: 3000,
      logLevel: 'info',
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reports every bad setting at once, each by name', () => {
    const error = catchConfigError({
      SEND_RATE_LIMIT: 'abc',
      POLL_INTERVAL: 'soon',
      HTTP_PORT: '70000',
    });
    expect(error.problems.map((p) => p.setting).sort()).toEqual([
      'HTTP_PORT',
      'POLL_INTERVAL',
      'SEND_RATE_LIMIT',
    ]);
    expect(error.message).toMatch(/^SEND_RATE_LIMIT: expected N\/DURATION/m);
  });

  it('never echoes a secret setting in its error', () => {
    const error = catchConfigError({ REDIS_URL: 'http://user:hunter2-secret@host' }, [
      'AGENT_API_KEY',
    ]);
    expect(error.message).toContain('REDIS_URL');
    expect(error.message).toContain('AGENT_API_KEY: is required');
    expect(error.message).not.toContain('hunter2-secret');
  });

  it.each(['DASHBOARD_TOKEN', 'INTAKE_TOKEN'] as const)(
    'refuses a %s shorter than 16 characters without echoing it',
    (name) => {
      const error = catchConfigError({ [name]: 'short-tok3n' });
      expect(error.problems).toEqual([
        { setting: name, message: 'must be at least 16 characters' },
      ]);
      expect(error.message).not.toContain('short-tok3n');
      expect(loadConfig({ [name]: 'x'.repeat(16) })).toBeDefined();
    },
  );

  it('exits 2 with one line for a short token, before connecting anywhere', async () => {
    const { code, stderr } = await runCliToEnd(['serve'], {
      REDIS_URL: 'redis://127.0.0.1:1',
      DASHBOARD_TOKEN: 'change-me',
    });
    expect(code).toBe(2);
    expect(stderr).toBe('agent-dispatch: DASHBOARD_TOKEN: must be at least 16 characters\n');
  });

  it('lets flags override the environment', () => {
    const config = loadConfig({ HTTP_PORT: '3000' }, { HTTP_PORT: '4000' });
    expect(config.httpPort).toBe(4000);
  });
});

function catchConfigError(
  env: Record<string, string>,
  required: readonly SettingName[] = [],
): ConfigError {
  try {
    loadConfig(env, {}, { required });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('the README', () => {
  it('documents every setting', async () => {
    const { readFileSync } = await import('node:fs');
    const { SETTINGS } = await import('../../src/config/index.js');
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    // The README is kept short: a setting of one deployment kind may have its row in docs/.
    const operations = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    const row = (name: string) => new RegExp(`^\\|\\s*\`${name}\`\\s*\\|`, 'm');
    const missing = Object.keys(SETTINGS).filter(
      (name) => !row(name).test(readme) && !row(name).test(operations),
    );
    expect(missing).toEqual([]);
  });
});
