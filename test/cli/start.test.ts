import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/namespace.js';

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
      const dashboard = await eventually(() => /dashboard: (\S+)/.exec(proc.output.stderr)?.[1], {
        timeoutMs: 30_000,
        what: 'the dashboard line',
      });
      expect(proc.output.stderr.split('\n')[0]).toMatch(
        /AGENT_API_KEY is not set: sending to the bundled simulator/,
      );
      const redisUrl = /private redis-server at (\S+)/.exec(proc.output.stderr)?.[1] as string;
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

      await eventually(() => (/completed 6\b/.test(proc.output.stderr) ? true : undefined), {
        timeoutMs: 30_000,
        what: 'six demo follow-ups completed',
      });

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
