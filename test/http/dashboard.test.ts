import { mkdirSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DISPATCH_JOB_NAME } from '../../src/dispatch/queue.js';
import { createNamespace, type Namespace } from '../support/namespace.js';
import { expectNoLeakedHandles, startTestServer, type TestServer } from './fixture.js';

const TOKEN = 'dashboard-secret-token';
/** `SAVE_DASHBOARD_SCREENSHOT=1 npx vitest run test/http/dashboard.test.ts` refreshes the README's picture. */
const SCREENSHOT =
  process.env['SAVE_DASHBOARD_SCREENSHOT'] === '1' ? 'docs/dashboard.png' : undefined;

// Runs after every describe block's own cleanup.
afterAll(() => expectNoLeakedHandles());

describe('/dashboard', () => {
  let ns: Namespace;
  let app: TestServer;
  let browser: Browser;

  beforeAll(async () => {
    ns = createNamespace('dashboard');
    app = await startTestServer(ns.config({ DASHBOARD_TOKEN: TOKEN }));
    const [dispatch, poll] = app.queues;
    for (let i = 1; i <= 3; i++) {
      const data = { v: 1, dispatchId: `d-${i}`, projectId: 'acme', jobId: `job-${i}` };
      await dispatch?.add(DISPATCH_JOB_NAME, data, {
        jobId: `d-${i}`,
        delay: i === 3 ? 60_000 : 0,
      });
    }
    await poll?.upsertJobScheduler('poll-tick', { every: 5_000 }, { name: 'tick' });
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await ns?.cleanup();
  });

  it('answers 401 with a Basic challenge without the token, or with a wrong one', async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong' },
      { authorization: basic('wrong') },
    ];
    for (const headers of attempts) {
      const res = await fetch(`${app.url}/dashboard`, { headers, redirect: 'manual' });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Basic realm="agent-dispatch"/);
      const text = await res.text();
      expect(JSON.parse(text)).toHaveProperty('error');
      expect(text).not.toContain(TOKEN);
    }
    expect((await fetch(`${app.url}/dashboard?token=wrong`, { redirect: 'manual' })).status).toBe(
      401,
    );
    expect((await fetch(`${app.url}/dashboard/api/queues`)).status).toBe(401);
  });

  it('accepts the token as a bearer token', async () => {
    const res = await fetch(`${app.url}/dashboard/api/queues`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(200);
    const body = JSON.stringify(await res.json());
    expect(body).toContain('dispatch');
    expect(body).not.toContain(TOKEN);
  });

  it('refuses changes that a page on another site asks for', async () => {
    const auth = { authorization: basic(TOKEN) };
    const crossSite: Record<string, string>[] = [
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'https://evil.example' },
    ];
    for (const headers of crossSite) {
      const res = await fetch(`${app.url}/dashboard/api/queues/dispatch/pause`, {
        method: 'PUT',
        headers: { ...auth, ...headers },
      });
      expect(res.status).toBe(403);
    }
    // The dashboard's own page gets past the guard (and then bull-board's read-only mode).
    const own = await fetch(`${app.url}/dashboard/api/queues/dispatch/pause`, {
      method: 'PUT',
      headers: { ...auth, 'sec-fetch-site': 'same-origin' },
    });
    expect(own.status).not.toBe(403);
    expect(await app.queues[0]?.isPaused()).toBe(false);
  });

  it('renders the queues in a browser with Basic auth', async () => {
    const context = await browser.newContext({
      httpCredentials: { username: 'ops', password: TOKEN },
    });
    try {
      const page = await context.newPage();
      const res = await page.goto(`${app.url}/dashboard`);
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
      await page.goto(`${app.url}/dashboard?token=${TOKEN}`);
      expect(page.url()).toBe(`${app.url}/dashboard`);
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

describe('/dashboard without DASHBOARD_TOKEN', () => {
  it('is off, and says how to turn it on', async () => {
    const ns = createNamespace('dashboard-off');
    const app = await startTestServer(ns.config());
    try {
      const res = await fetch(`${app.url}/dashboard`);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: expect.stringContaining('DASHBOARD_TOKEN') });
    } finally {
      await app.close();
      await ns.cleanup();
    }
  });
});

function basic(password: string): string {
  return `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;
}
