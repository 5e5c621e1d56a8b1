import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { eventually, useNamespace } from '../support/namespace.js';

describe('agent-dispatch start, with nothing set', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-start-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs a private Redis and the simulator, delivers the demo follow-ups, and stops cleanly', async () => {
    const proc = runCli(['start', '--data-dir', dir], {
      HTTP_PORT: '0',
      LOG_LEVEL: 'warn',
      POLL_INTERVAL: '200ms',
      POLL_MIN_INTERVAL: '200ms',
      ACTIVE_GRACE: '10s',
    });
    try {
      const dashboard = await eventually(
        () => /follow-ups page: (\S+)/.exec(proc.output.stderr)?.[1],
        {
          timeoutMs: 30_000,
          what: 'the dashboard line',
        },
      );
      expect(proc.output.stderr.split('\n')[0]).toMatch(
        /AGENT_API_KEY is not set: sending to the bundled simulator/,
      );
      const redisUrl = /running a private .+? at (redis:\/\/\S+)/.exec(
        proc.output.stderr,
      )?.[1] as string;
      expect(redisUrl).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);

      // The printed link trades its token for a session cookie, as a browser would keep it.
      const link = await fetch(dashboard, { redirect: 'manual' });
      expect(link.status).toBeGreaterThanOrEqual(300);
      const cookie = (link.headers.get('set-cookie') ?? '').split(';')[0] as string;
      const page = await fetch(new URL(link.headers.get('location') ?? '', dashboard), {
        headers: { cookie },
      });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<html');
      expect((await fetch(dashboard.replace(/\?token=.*/, ''))).status).toBe(401);

      // Every scope has a token, printed after the follow-ups page line, and each one works.
      const lines = await eventually(
        () => {
          const found = ['follow-ups page', 'intake', 'events', 'operator'].map((what) =>
            proc.output.stderr
              .split('\n')
              .findIndex((l) => l.startsWith(`agent-dispatch: ${what}:`)),
          );
          return found.every((i) => i >= 0) ? found : undefined;
        },
        { timeoutMs: 30_000, what: 'the intake, events and operator lines' },
      );
      expect([...lines].sort((a, b) => a - b)).toEqual(lines);
      const bearer = (what: string) =>
        new RegExp(`${what}: (?:GET |POST )?(\\S+?),? .*"Authorization: Bearer (\\w+)"`).exec(
          proc.output.stderr,
        );
      const events = bearer('events');
      const operator = bearer('operator');
      expect(events?.[1]).toMatch(/\/v1\/events$/);
      const auth = (token?: string) => ({ headers: { authorization: `Bearer ${token ?? ''}` } });
      expect((await fetch(events?.[1] ?? '', auth(events?.[2]))).status).toBe(200);
      const webhooks = (operator?.[1] ?? '').replace(/\/v1\/projects\/ID$/, '/v1/webhooks');
      expect((await fetch(webhooks, auth(operator?.[2]))).status).toBe(200);

      await eventually(() => (/completed 6\b/.test(proc.output.stderr) ? true : undefined), {
        timeoutMs: 30_000,
        what: 'six demo follow-ups completed',
      });
      expect(proc.output.stderr).toMatch(/enqueued 6 demo follow-ups \(6 in the demo set\)/);

      expect(await proc.stop('SIGTERM')).toBe(0);
      const probe = new Redis(redisUrl, {
        lazyConnect: true,
        retryStrategy: () => null,
        maxRetriesPerRequest: 0,
      });
      probe.on('error', () => {});
      await expect(probe.connect()).rejects.toThrow();
      probe.disconnect();
    } finally {
      await proc.stop('SIGKILL');
    }
  }, 90_000);
});

describe('agent-dispatch start, with a real REDIS_URL', () => {
  const ns = useNamespace('start');

  /** The namespace's environment without any API key: the Docker image's default command. */
  const withoutKey = (): Record<string, string> => {
    const { AGENT_API_KEY: _key, ...env } = ns().env({ HTTP_PORT: '0' });
    return env;
  };

  it('exits 2 naming AGENT_API_KEY when no key is set, having written nothing to Redis', async () => {
    const proc = runCli(['start'], withoutKey());
    try {
      const code = await Promise.race([
        proc.exited,
        new Promise((r) => setTimeout(() => r('still running after 20 s'), 20_000)),
      ]);
      expect(code).toBe(2);
      const lines = proc.output.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^agent-dispatch: AGENT_API_KEY: .*--simulator/);
      expect(await ns().redis.keys(`${ns().prefix}*`)).toEqual([]);
    } finally {
      await proc.stop('SIGKILL');
    }
  }, 30_000);

  it('uses the simulator with --simulator, says so, and enqueues no demo follow-ups', async () => {
    const proc = runCli(['start', '--simulator'], withoutKey());
    try {
      await eventually(() => (/metrics: /.test(proc.output.stderr) ? true : undefined), {
        timeoutMs: 30_000,
        what: 'the metrics line',
      });
      expect(proc.output.stderr.split('\n')[0]).toMatch(
        /--simulator: sending to the bundled simulator at http:\/\/127\.0\.0\.1:\d+/,
      );
      expect(proc.output.stderr).not.toMatch(/demo follow-ups/);
      expect(await ns().redis.keys(`${ns().prefix}:d:*`)).toEqual([]);
      expect(await proc.stop('SIGTERM')).toBe(0);
    } finally {
      await proc.stop('SIGKILL');
    }
  }, 60_000);
});
