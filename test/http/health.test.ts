import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/namespace.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

const TOKEN = 'health-intake-token';

interface Readiness {
  status: string;
  checks: Record<string, string>;
  durability?: string;
}

// Runs after every describe block's own cleanup.
afterAll(() => expectNoLeakedHandles());

describe('health and readiness', () => {
  let redisServer: PrivateRedis;
  const roles = [{ name: 'consumer', running: true }];
  beforeAll(async () => {
    redisServer = await startPrivateRedis();
  });
  afterAll(async () => {
    await redisServer?.destroy();
  });
  const served = useTestServer('health', { INTAKE_TOKEN: TOKEN }, () => ({
    redisUrl: redisServer.url,
    withProducer: true,
    roles: () => roles,
  }));

  const readiness = async (): Promise<[number, Readiness]> => {
    const res = await fetch(`${served.app.url}/readyz`);
    return [res.status, (await res.json()) as Readiness];
  };

  it('answers /healthz while the process runs', async () => {
    const res = await fetch(`${served.app.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('follows Redis: ready, unready while it is down, ready again after a restart', async () => {
    const ready = await eventually(
      async () => {
        const [status, body] = await readiness();
        return status === 200 ? body : undefined;
      },
      { what: '/readyz 200' },
    );
    // The test server is Redis 7.0 with appendfsync everysec: a field, not a failing check.
    expect(ready).toEqual({
      status: 'ready',
      checks: { redis: 'ok', 'role:consumer': 'ok' },
      durability: 'at-risk',
    });

    await redisServer.stop();
    const down = await eventually(
      async () => {
        const [status, body] = await readiness();
        return status === 503 ? body : undefined;
      },
      { what: '/readyz 503' },
    );
    expect(down.status).toBe('unready');
    expect(down.checks['redis']).not.toBe('ok');
    expect(down.checks['role:consumer']).toBe('ok');
    expect(JSON.stringify(down)).not.toContain(String(redisServer.port));

    const intake = await fetch(`${served.app.url}/v1/followups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'hello' }),
    });
    expect(intake.status).toBe(503);
    const text = await intake.text();
    expect(JSON.parse(text)).toMatchObject({
      error: expect.any(String),
      code: 'redis_unavailable',
    });
    expect(text).not.toContain(String(redisServer.port));

    await redisServer.restart();
    await eventually(async () => ((await readiness())[0] === 200 ? true : undefined), {
      what: '/readyz 200 after the restart',
    });
  });

  it('is unready while a role is not running, and names it', async () => {
    roles[0] = { name: 'consumer', running: false };
    try {
      const [status, body] = await readiness();
      expect(status).toBe(503);
      expect(body.checks).toMatchObject({ 'role:consumer': 'not running' });
    } finally {
      roles[0] = { name: 'consumer', running: true };
    }
  });
});
