import { mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOf } from '../support/admin.js';
import { launchBrowser } from '../support/browser.js';
import { readEvents } from '../support/events.js';
import { fleetEnv, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startRoles, waitForWorkers } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';
import { expectNoLeakedHandles, startTestServer } from './fixture.js';

const TOKEN = 'followups-page-token';
/** `SAVE_DASHBOARD_SCREENSHOT=1` refreshes the pictures of the page in docs/. */
const SAVE = process.env['SAVE_DASHBOARD_SCREENSHOT'] === '1';

afterAll(() => expectNoLeakedHandles());

/**
 * `/dashboard/followups` in headless Chromium during a run of a worker and a poller (processes):
 * one project paused by the operator, one parked by the agent API's 429, one with a long run
 * tracked. The page is judged by what it shows and by what a click changes in Redis.
 */
describe('/dashboard/followups in a browser', () => {
  // Two sends per project per minute: the third of `hot` is answered 429 and parks it.
  const simulator = useSimulator({ workTimeMs: 60_000, sendLimit: { max: 2, windowMs: 60_000 } });
  const fleet = useFleet('followups-page', simulator);
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  /** Everything a row of the projects table says, as text. */
  const projectRow = (page: Page, projectId: string) =>
    page.locator(`tr[data-project="${projectId}"]`).innerText();

  it('shows a paused and a parked project as such, and a click on Cancel ends that follow-up cancelled', async () => {
    const { ns, producer } = fleet();
    const admin = adminOf(ns);
    // The buttons are an operator's: its token opens the page with them.
    const config = ns.config({ OPERATOR_TOKEN: TOKEN, DASHBOARD_ALLOW_CONTROLS: 'true' });
    const app = await startTestServer(config);
    try {
      const env = fleetEnv(ns, simulator());
      const worker = startRoles('worker', 1, env);
      fleet().processes = [...worker, ...startRoles('poller', 1, env)];
      await waitForWorkers(ns, 1, { processes: worker });
      for (const p of ['held', 'hot', 'calm'])
        for (const j of ['a', 'b', 'c']) simulator().seedJob(p, j);
      await admin.pauseProject('held');
      const held = await producer.sendMany(
        ['a', 'b'].map((jobId) => ({ projectId: 'held', jobId, prompt: `held ${jobId}` })),
      );
      await producer.sendMany([
        ...['a', 'b', 'c'].map((jobId) => ({ projectId: 'hot', jobId, prompt: `hot ${jobId}` })),
        { projectId: 'calm', jobId: 'a', prompt: 'calm a' },
      ]);
      await eventually(
        async () => ((await admin.showProject('hot')).parkedUntil ? true : undefined),
        { timeoutMs: 30_000, what: 'hot parked by a 429' },
      );
      await eventually(
        async () => ((await admin.showProject('calm')).tracked === 1 ? true : undefined),
        { timeoutMs: 30_000, what: 'calm tracked' },
      );

      const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
      try {
        const page = await context.newPage();
        const res = await page.goto(`${app.url}/dashboard/followups?token=${TOKEN}`);
        expect(res?.status()).toBe(200);
        expect(page.url()).toBe(`${app.url}/dashboard/followups`);
        expect(await projectRow(page, 'held')).toMatch(/paused/);
        expect(await projectRow(page, 'hot')).toMatch(/parked \(429\)/);
        expect(await projectRow(page, 'calm')).toMatch(/sending/);
        expect(await projectRow(page, 'held')).not.toMatch(/parked/);
        expect(await page.locator('#tracked').innerText()).toMatch(/calm/);
        if (SAVE) {
          mkdirSync('docs', { recursive: true });
          await page.screenshot({ path: 'docs/followups.png', fullPage: true });
        }

        const target = held[0]?.dispatchId ?? '';
        await page.locator(`tr[data-dispatch="${target}"] button`, { hasText: 'Cancel' }).click();
        await page.waitForURL(/done=/);
        expect(await page.getByRole('status').innerText()).toContain('Follow-up cancelled.');
        const events = await readEvents(ns.redis, ns.eventsStream);
        expect(events.filter((e) => e.dispatchId === target).map((e) => e.type)).toEqual([
          'followup.cancelled',
        ]);
        expect(await page.locator(`tr[data-dispatch="${target}"]`).count()).toBe(0);
        expect(await page.locator('#events').innerText()).toContain(target);

        // Resume from the page: held's other follow-up goes out.
        await page.locator('tr[data-project="held"] button', { hasText: 'Resume' }).click();
        await page.waitForURL(/resumed/);
        await eventually(
          () => (simulator().deliveries.some((d) => d.prompt === 'held b') ? true : undefined),
          { timeoutMs: 30_000, what: 'held b sent after the resume' },
        );
        expect(simulator().deliveries.some((d) => d.prompt === 'held a')).toBe(false);

        // At 400 px the tables become cards: nothing overflows sideways, the labels show.
        await page.setViewportSize({ width: 400, height: 900 });
        await page.goto(`${app.url}/dashboard/followups`);
        const width = await page.evaluate<number>('document.documentElement.scrollWidth');
        expect(width).toBeLessThanOrEqual(400);
        expect(await projectRow(page, 'hot')).toMatch(/parked \(429\)/);
        expect(await page.locator('#projects thead').isVisible()).toBe(false);
        if (SAVE) await page.screenshot({ path: 'docs/followups-narrow.png', fullPage: true });
      } finally {
        await context.close();
      }
    } finally {
      await app.close();
      await admin.close();
    }
  }, 120_000);

  it('is read-only without DASHBOARD_ALLOW_CONTROLS, and behind the dashboard token', async () => {
    const { ns, producer } = fleet();
    const operator = 'followups-page-operator';
    const app = await startTestServer(
      ns.config({ DASHBOARD_TOKEN: TOKEN, OPERATOR_TOKEN: operator }),
    );
    try {
      const [queued] = await producer.sendMany([{ projectId: 'x', jobId: 'a', prompt: 'x' }]);
      expect((await fetch(`${app.url}/dashboard/followups`)).status).toBe(401);
      const auth = { authorization: `Bearer ${TOKEN}` };
      const page = await fetch(`${app.url}/dashboard/followups`, { headers: auth });
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
      const html = await page.text();
      expect(html).toContain(queued?.dispatchId);
      expect(html).not.toContain('<button');
      const cancel = (token: string) =>
        fetch(`${app.url}/dashboard/followups/cancel/${queued?.dispatchId}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}` },
          redirect: 'manual',
        });
      expect((await cancel(TOKEN)).status).toBe(403);
      expect((await cancel(operator)).status).toBe(405);
      expect((await producer.status(queued?.dispatchId ?? ''))?.state).toBe('queued');
    } finally {
      await app.close();
    }
  });
});
