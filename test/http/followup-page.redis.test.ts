import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { DispatchStore } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { launchBrowser } from '../support/browser.js';
import { bearerCall, expectNoLeakedHandles, useTestServer } from './fixture.js';

const OPERATOR = 'followup-page-operator';
const VIEWER = 'followup-page-viewer';
const PR = 'https://github.com/acme/web/pull/7';

afterAll(() => expectNoLeakedHandles());

/**
 * The page of one follow-up, the search, and the redrive of a dead letter, in headless Chromium:
 * judged by what the pages show and by what a click changes in Redis. Follow-ups are ended through
 * FINISH as a role ends them (no role runs, so nothing sends the redriven one).
 */
describe('the page of one follow-up, its search and its redrive', () => {
  const served = useTestServer(
    'followup-page',
    {
      OPERATOR_TOKEN: OPERATOR,
      DASHBOARD_TOKEN: VIEWER,
      DASHBOARD_ALLOW_CONTROLS: 'true',
      INTAKE_TOKEN: 'followup-page-intake',
    },
    () => ({ withProducer: true }),
  );
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  const storeOf = () =>
    new DispatchStore(served.ns.redis, keysFor(served.ns.prefix), {
      eventsStream: served.ns.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 600_000,
    });

  it('shows its timeline and event, finds it by key and by job, and redrives it with one click', async () => {
    const { ns, app } = served;
    const producer = app.producer;
    if (!producer) throw new Error('no producer');
    const store = storeOf();
    const keys = keysFor(ns.prefix);
    const { dispatchId: dead } = await producer.send({
      projectId: 'web',
      jobId: 'job-404',
      prompt: 'Also update the changelog.',
      key: 'ticket-7',
    });
    const deadRecord = await store.sends.get(dead);
    await store.finish(deadRecord!, {
      type: EVENT_TYPES.undeliverable,
      reason: 'not_found',
    });
    const { dispatchId: done } = await producer.send({
      projectId: 'web',
      jobId: 'job-ok',
      prompt: 'Fix the typo.',
    });
    const doneRecord = await store.sends.get(done);
    await store.finish(doneRecord!, {
      type: EVENT_TYPES.completed,
      job: { id: 'job-ok', status: 'completed', prLink: PR },
    });

    const context = await browser.newContext({ viewport: { width: 1300, height: 900 } });
    try {
      const page = await context.newPage();
      await page.goto(`${app.url}/dashboard/followups?token=${OPERATOR}`);
      // The dead letter is listed with its button; the completed one's PR is linked in the events.
      const row = page.locator(`#dead-letters tr[data-dead="${dead}"]`);
      expect(await row.innerText()).toMatch(/not_found/);
      expect(await row.locator('button', { hasText: 'Redrive' }).count()).toBe(1);
      expect(await page.locator(`#events a[href="${PR}"]`).count()).toBe(1);

      // Search by the idempotency key: one follow-up, so its page opens.
      await page.locator('input[name="q"]').fill('ticket-7');
      await page.locator('input[type="submit"]').click();
      await page.waitForURL(`${app.url}/dashboard/followups/${dead}`);
      const step = (name: string) => page.locator(`#timeline li[data-step="${name}"]`).innerText();
      expect(await step('queued')).toMatch(/\d{4}-\d\d-\d\dT/);
      expect(await step('sent')).toMatch(/–/);
      expect(await step('ended')).toMatch(/undeliverable/);
      expect(await page.locator('#facts').innerText()).toMatch(/not_found/);
      expect(await page.locator('#event pre').innerText()).toContain('followup.undeliverable');

      // Search by the agent job id finds it too; by a job with nothing, nothing.
      await page.goto(`${app.url}/dashboard/followups?q=job-404`);
      expect(page.url()).toBe(`${app.url}/dashboard/followups/${dead}`);
      await page.goto(`${app.url}/dashboard/followups?q=no-such-job`);
      expect(await page.locator('#results').innerText()).toMatch(/Nothing found/);

      // The completed one: its PR link on its page, and no redrive.
      await page.goto(`${app.url}/dashboard/followups/${done}`);
      expect(await page.locator(`#facts a[href="${PR}"]`).count()).toBe(1);
      expect(await page.locator('button', { hasText: 'Redrive' }).count()).toBe(0);

      // Redrive from the dead letter's page: the new follow-up's page opens, linked back.
      await page.goto(`${app.url}/dashboard/followups/${dead}`);
      await page.locator('#actions button', { hasText: 'Redrive' }).click();
      await page.waitForURL(/done=redriven/);
      expect(await page.getByRole('status').innerText()).toMatch(/Redriven/);
      const fresh = decodeURIComponent(new URL(page.url()).pathname.split('/').pop() ?? '');
      expect(fresh).not.toBe(dead);
      expect(await page.locator('#facts').innerText()).toContain(dead);
      expect(await ns.redis.hget(keys.dispatch(dead), 'redrivenTo')).toBe(fresh);
      expect(await store.sends.get(fresh)).toMatchObject({
        state: 'queued',
        jobId: 'job-404',
        prompt: 'Also update the changelog.',
      });
      // The old one's page now links to it, without a button.
      await page.goto(`${app.url}/dashboard/followups/${dead}`);
      expect(await page.locator(`#facts a[href$="/${fresh}"]`).count()).toBe(1);
      expect(await page.locator('button', { hasText: 'Redrive' }).count()).toBe(0);
    } finally {
      await context.close();
    }

    // A viewer's token sees the page without buttons and may not redrive.
    const viewer = await fetch(`${app.url}/dashboard/followups/${dead}`, {
      headers: { authorization: `Bearer ${VIEWER}` },
    });
    expect(viewer.status).toBe(200);
    expect(await viewer.text()).not.toContain('<button');
    const post = await fetch(`${app.url}/dashboard/followups/${dead}/redrive`, {
      method: 'POST',
      headers: { authorization: `Bearer ${VIEWER}` },
    });
    expect(post.status).toBe(403);
    expect(
      (
        await fetch(`${app.url}/dashboard/followups/nope`, {
          headers: { authorization: `Bearer ${VIEWER}` },
        })
      ).status,
    ).toBe(404);
  }, 60_000);

  it('POST /v1/followups/{id}/redrive: operator only, idempotent, 409 naming why', async () => {
    const { app } = served;
    const call = bearerCall(served, OPERATOR);
    const store = storeOf();
    const { dispatchId } = await app.producer!.send({ projectId: 'api', jobId: 'j', prompt: 'p' });
    expect((await call('POST', `/v1/followups/${dispatchId}/redrive`)).status).toBe(409);
    const queued = await call('POST', `/v1/followups/${dispatchId}/redrive`);
    expect(await queued.json()).toMatchObject({ code: 'not_redrivable', why: 'not_ended' });
    await store.finish((await store.sends.get(dispatchId))!, {
      type: EVENT_TYPES.timedOut,
    });
    const intake = await call(
      'POST',
      `/v1/followups/${dispatchId}/redrive`,
      undefined,
      'followup-page-intake',
    );
    expect(intake.status).toBe(403);
    const first = await call('POST', `/v1/followups/${dispatchId}/redrive`);
    expect(first.status).toBe(200);
    const body = (await first.json()) as { redrivenTo: string; created: boolean };
    expect(body.created).toBe(true);
    const again = await call('POST', `/v1/followups/${dispatchId}/redrive`);
    expect(await again.json()).toEqual({ dispatchId, redrivenTo: body.redrivenTo, created: false });
    expect((await call('POST', '/v1/followups/unknown-id/redrive')).status).toBe(404);
  });
});
