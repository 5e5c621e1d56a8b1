import { afterAll, describe, expect, it } from 'vitest';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

const OPERATOR = 'page-notice-operator-token';

afterAll(() => expectNoLeakedHandles());

describe("the follow-ups page's notice", () => {
  const served = useTestServer('page-notice', {
    OPERATOR_TOKEN: OPERATOR,
    DASHBOARD_ALLOW_CONTROLS: 'true',
  });
  const page = async (query: string) => {
    const res = await fetch(`${served.app.url}/dashboard/followups?${query}`, {
      headers: { authorization: `Bearer ${OPERATOR}` },
    });
    expect(res.status).toBe(200);
    return res.text();
  };

  it('shows no words of a link: an unknown code shows nothing', async () => {
    const lure = 'Session expired: call 555-0100 with your token';
    for (const query of [
      new URLSearchParams({ failed: lure }),
      new URLSearchParams({ done: lure }),
      new URLSearchParams({ done: 'toString' }),
    ]) {
      const html = await page(query.toString());
      expect(html).not.toContain('555-0100');
      expect(html).not.toContain('class="notice');
    }
  });

  it("shows the fixed text of an action's outcome", async () => {
    const res = await fetch(`${served.app.url}/dashboard/followups/projects/P/pause`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR}` },
      redirect: 'manual',
    });
    expect(res.status).toBe(303);
    const location = res.headers.get('location') ?? '';
    expect(location).toBe('/dashboard/followups?done=paused');
    expect(await page(location.split('?')[1] ?? '')).toContain('Project paused.');
    const missing = await fetch(`${served.app.url}/dashboard/followups/cancel/no-such-id`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR}` },
      redirect: 'manual',
    });
    const query = missing.headers.get('location')?.split('?')[1] ?? '';
    expect(query).toBe('failed=unknown-dispatch');
    expect(await page(query)).toContain('No such follow-up');
  });
});
