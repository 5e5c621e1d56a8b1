import { mkdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { Worker, type Queue } from 'bullmq';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DISPATCH_JOB_NAME } from '../../src/store/register.js';
import { launchBrowser } from '../support/browser.js';
import { eventually, withNamespace } from '../support/namespace.js';
import { expectNoLeakedHandles, startTestServer, useTestServer } from './fixture.js';

const TOKEN = 'dashboard-secret-token';
const OPERATOR = 'dashboard-operator-token';
/** `SAVE_DASHBOARD_SCREENSHOT=1 npx vitest run test/http/dashboard.test.ts` refreshes the README's picture. */
const SCREENSHOT =
  process.env['SAVE_DASHBOARD_SCREENSHOT'] === '1' ? 'docs/dashboard.png' : undefined;

// Runs after every describe block's own cleanup.
afterAll(() => expectNoLeakedHandles());

describe('/dashboard', () => {
  const served = useTestServer('dashboard', { DASHBOARD_TOKEN: TOKEN, OPERATOR_TOKEN: OPERATOR });
  beforeAll(async () => {
    const [dispatch, poll] = served.app.queues;
    for (let i = 1; i <= 3; i++) {
      const data = { p: 'acme', j: `job-${i}` };
      await dispatch?.add(DISPATCH_JOB_NAME, data, {
        jobId: `d-${i}`,
        delay: i === 3 ? 60_000 : 0,
      });
    }
    await poll?.upsertJobScheduler('poll-tick', { every: 5_000 }, { name: 'tick' });
  });

  it('answers 401 with a Basic challenge without the token, or with a wrong one', async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong' },
      { authorization: basic('wrong') },
    ];
    for (const headers of attempts) {
      const res = await fetch(`${served.app.url}/dashboard`, { headers, redirect: 'manual' });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Basic realm="agent-dispatch"/);
      const text = await res.text();
      expect(JSON.parse(text)).toHaveProperty('error');
      expect(text).not.toContain(TOKEN);
    }
    expect(
      (await fetch(`${served.app.url}/dashboard?token=wrong`, { redirect: 'manual' })).status,
    ).toBe(401);
    expect((await fetch(`${served.app.url}/dashboard/api/queues`)).status).toBe(401);
  });

  it('accepts the token as a bearer token', async () => {
    const res = await fetch(`${served.app.url}/dashboard/api/queues`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(200);
    const body = JSON.stringify(await res.json());
    expect(body).toContain('dispatch');
    expect(body).not.toContain(TOKEN);
  });

  it('refuses changes that a page on another site asks for', async () => {
    const auth = { authorization: basic(OPERATOR) };
    const crossSite: Record<string, string>[] = [
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'https://evil.example' },
    ];
    for (const headers of crossSite) {
      const res = await fetch(`${served.app.url}/dashboard/api/queues/dispatch/pause`, {
        method: 'PUT',
        headers: { ...auth, ...headers },
      });
      expect(res.status).toBe(403);
    }
    // The dashboard's own page gets past the guard (and then bull-board's read-only mode).
    const own = await fetch(`${served.app.url}/dashboard/api/queues/dispatch/pause`, {
      method: 'PUT',
      headers: { ...auth, 'sec-fetch-site': 'same-origin' },
    });
    expect(own.status).not.toBe(403);
    expect(await served.app.queues[0]?.isPaused()).toBe(false);
  });

  it('lets a dashboard token look but not change anything: 403 naming the operator scope', async () => {
    const res = await fetch(`${served.app.url}/dashboard/api/queues/dispatch/pause`, {
      method: 'PUT',
      headers: { authorization: basic(TOKEN), 'sec-fetch-site': 'same-origin' },
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ error: expect.stringContaining('OPERATOR_TOKEN') });
  });

  // Only these need Chromium: without it they fail naming the package, and the rest still run.
  describe('in a browser', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchBrowser();
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('renders the queues in a browser with Basic auth', async () => {
      const context = await browser.newContext({
        httpCredentials: { username: 'ops', password: TOKEN },
      });
      try {
        const page = await context.newPage();
        const res = await page.goto(`${served.app.url}/dashboard`);
        expect(res?.status()).toBe(200);
        await page.getByText('dispatch', { exact: true }).first().waitFor({ timeout: 20_000 });
        await page.getByText('poll', { exact: true }).first().waitFor({ timeout: 20_000 });
      } finally {
        await context.close();
      }
    });

    it('renders the queues through the ?token= link, which sets a cookie and drops the token', async () => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        await page.goto(`${served.app.url}/dashboard?token=${TOKEN}`);
        expect(page.url()).toBe(`${served.app.url}/dashboard`);
        const [cookie] = await context.cookies();
        expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/dashboard' });
        expect(cookie?.value).not.toContain(TOKEN);
        await page.getByText('dispatch', { exact: true }).first().waitFor({ timeout: 20_000 });
        await page.getByText('poll', { exact: true }).first().waitFor({ timeout: 20_000 });
        if (SCREENSHOT) {
          mkdirSync('docs', { recursive: true });
          await page.screenshot({ path: SCREENSHOT });
        }
      } finally {
        await context.close();
      }
    });
  });
});

describe('/dashboard redirects', () => {
  const served = useTestServer('dashboard-redirect', { DASHBOARD_TOKEN: TOKEN });

  it.each([
    `/dashboard/..//evil.example?token=${TOKEN}`,
    `/dashboard/..//evil.example/path?token=${TOKEN}&x=1`,
    `/dashboard/../..//evil.example?token=${TOKEN}`,
    `/dashboard/%2e%2e//evil.example?token=${TOKEN}`,
    `/dashboard/..%2F%2Fevil.example?token=${TOKEN}`,
    `/dashboard/..\\/evil.example?token=${TOKEN}`,
    `/dashboard/..//evil.example`,
    `/dashboard//evil.example?token=${TOKEN}`,
    `/dashboard/static/..//evil.example/`,
    `/dashboard/static`,
  ])('never sends %s off-site', async (path) => {
    const { status, location } = await rawGet(served.app.url, path);
    expect(status).toBeLessThan(500);
    if (location !== undefined) {
      expect(new URL(location, served.app.url).origin).toBe(new URL(served.app.url).origin);
      expect(location).toMatch(/^\/dashboard(\/|$|\?)/);
    }
  });

  it('still trades ?token= for the cookie on the page it was given for', async () => {
    const { status, location } = await rawGet(
      served.app.url,
      `/dashboard/queue/dispatch?token=${TOKEN}`,
    );
    expect(status).toBe(303);
    expect(location).toBe('/dashboard/queue/dispatch');
  });
});

describe('/dashboard with DASHBOARD_ALLOW_RETRIES=true', () => {
  let queue: Queue;
  const auth = { authorization: `Bearer ${OPERATOR}` };
  const write = (method: string, path: string, body?: unknown) =>
    fetch(`${served.app.url}/dashboard/api/queues${path}`, {
      method,
      headers: { ...auth, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const stateOf = async (id: string) => (await queue.getJob(id))?.getState() ?? 'gone';

  const served = useTestServer('dashboard-writes', {
    DASHBOARD_TOKEN: TOKEN,
    OPERATOR_TOKEN: OPERATOR,
    DASHBOARD_ALLOW_RETRIES: 'true',
  });
  beforeAll(async () => {
    queue = served.app.queues[0] as Queue;
    // Two failed jobs and a completed one, through a real BullMQ Worker.
    for (const id of ['f-1', 'f-2', 'c-1']) {
      await queue.add(DISPATCH_JOB_NAME, { p: 'p', j: id }, { jobId: id });
    }
    const connection = served.app.redis.duplicate();
    const worker = new Worker(
      queue.name,
      async (job) => {
        if (job.id?.startsWith('f-')) throw new Error('planned failure');
      },
      { connection, prefix: served.ns.prefix },
    );
    worker.on('error', () => {});
    try {
      await eventually(
        async () =>
          (await queue.getJobCounts('failed', 'completed')).failed === 2 ? true : undefined,
        { what: 'two failed jobs' },
      );
    } finally {
      await worker.close();
      connection.disconnect();
    }
    for (const [id, delay] of [
      ['w-1', 0],
      ['d-1', 60_000],
      ['d-2', 60_000],
    ] as const) {
      await queue.add(DISPATCH_JOB_NAME, { p: 'p', j: id }, { jobId: id, delay });
    }
  });
  it('refuses every write but retry of failed and promote of delayed jobs', async () => {
    expect(await stateOf('c-1')).toBe('completed');
    const refused: [string, string, unknown?][] = [
      ['PUT', '/dispatch/empty'],
      ['PUT', '/dispatch/obliterate'],
      ['PUT', '/dispatch/clean/failed'],
      ['PUT', '/dispatch/clean/completed'],
      ['PUT', '/dispatch/clean/wait'],
      ['PUT', '/dispatch/retry/completed'],
      ['PUT', '/dispatch/c-1/retry'],
      ['PUT', '/dispatch/w-1/retry'],
      ['PUT', '/dispatch/w-1/promote'],
      ['PUT', '/dispatch/w-1/clean'],
      ['PUT', '/dispatch/f-1/clean'],
      ['PUT', '/dispatch/w-1/remove-unprocessed-children'],
      ['PATCH', '/dispatch/w-1/update-data', { data: { p: 'p', j: 'other' } }],
      ['PATCH', '/dispatch/d-1/delay', { delay: 0 }],
      ['PATCH', '/dispatch/w-1/priority', { priority: 1 }],
      ['POST', '/dispatch/add', { name: 'x', data: {} }],
      ['PUT', '/dispatch/pause'],
      ['PUT', '/pause'],
      ['PUT', '/dispatch/concurrency', { concurrency: 1 }],
      ['PUT', '/dispatch/rate-limit', { max: 1, duration: 1000 }],
      ['PUT', '/poll/job-schedulers/poll-tick/remove'],
      ['PUT', '/dispatch/EMPTY'],
      ['PUT', '/dispatch/empty/'],
      ['PUT', '/dispatch/RETRY/completed'],
      ['POST', '/dispatch/f-1/retry'],
      ['DELETE', '/dispatch/w-1'],
    ];
    for (const [method, path, body] of refused) {
      const res = await write(method, path, body);
      expect([403, 405], `${method} ${path}`).toContain(res.status);
      expect(await res.json(), `${method} ${path}`).toHaveProperty('error');
    }
    expect(await stateOf('w-1')).toBe('waiting');
    expect(await stateOf('c-1')).toBe('completed');
    expect(await stateOf('f-1')).toBe('failed');
    expect(await stateOf('d-1')).toBe('delayed');
    expect(await queue.isPaused()).toBe(false);
    expect((await queue.getJob('w-1'))?.data).toEqual({ p: 'p', j: 'w-1' });
  });

  it('retries a failed job and promotes a delayed one, one by one and all at once', async () => {
    expect((await write('PUT', '/dispatch/f-1/retry')).status).toBe(204);
    expect(await stateOf('f-1')).toBe('waiting');
    expect((await write('PUT', '/dispatch/d-1/promote')).status).toBe(204);
    expect(await stateOf('d-1')).toBe('waiting');
    expect((await write('PUT', '/dispatch/retry/failed')).status).toBe(200);
    expect(await stateOf('f-2')).toBe('waiting');
    expect((await write('PUT', '/dispatch/promote')).status).toBe(200);
    expect(await stateOf('d-2')).toBe('waiting');
  });
});

describe('/dashboard without DASHBOARD_TOKEN', () => {
  it('is off, and says how to turn it on', async () => {
    await withNamespace('dashboard-off', async (ns) => {
      const app = await startTestServer(ns.config());
      try {
        const res = await fetch(`${app.url}/dashboard`);
        expect(res.status).toBe(404);
        expect(await res.json()).toEqual({ error: expect.stringContaining('DASHBOARD_TOKEN') });
      } finally {
        await app.close();
      }
    });
  });
});

/** A GET sent with `path` exactly as written (fetch would resolve its dot segments first). */
function rawGet(base: string, path: string): Promise<{ status: number; location?: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, method: 'GET' }, (res) => {
      res.resume();
      res.on('end', () => {
        const { location } = res.headers;
        resolve({ status: res.statusCode ?? 0, ...(location === undefined ? {} : { location }) });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

function basic(password: string): string {
  return `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;
}
