import { afterAll, describe, expect, it } from 'vitest';
import { withNamespace } from '../support/namespace.js';
import { expectNoLeakedHandles, startTestServer } from './fixture.js';

const DASHBOARD = 'defaults-dashboard-token';
const METRICS = 'defaults-metrics-token-1';

afterAll(() => expectNoLeakedHandles());

/** Whether the server answers on `host` (another loopback address than the one it reports). */
async function reachable(url: string, host: string): Promise<boolean> {
  const target = new URL('/healthz', url);
  target.hostname = host;
  return fetch(target).then(
    (res) => res.ok,
    () => false,
  );
}

describe('safer defaults of the HTTP server', () => {
  it('binds 127.0.0.1 unless HTTP_HOST says otherwise', async () => {
    await withNamespace('http-host', async (ns) => {
      const local = await startTestServer(ns.config());
      const every = await startTestServer(ns.config({ HTTP_HOST: '0.0.0.0' }));
      try {
        expect(await reachable(local.url, '127.0.0.1')).toBe(true);
        // 127.0.0.2 is this machine too, but not the address bound: like a LAN address would be.
        expect(await reachable(local.url, '127.0.0.2')).toBe(false);
        expect(await reachable(every.url, '127.0.0.2')).toBe(true);
      } finally {
        await local.close();
        await every.close();
      }
    });
  });

  it('marks the dashboard cookie Secure behind a TLS proxy only with TRUST_PROXY', async () => {
    await withNamespace('http-proxy', async (ns) => {
      const direct = await startTestServer(ns.config({ DASHBOARD_TOKEN: DASHBOARD }));
      const proxied = await startTestServer(
        ns.config({ DASHBOARD_TOKEN: DASHBOARD, TRUST_PROXY: 'true' }),
      );
      const cookie = async (url: string) =>
        (
          await fetch(`${url}/dashboard?token=${DASHBOARD}`, {
            redirect: 'manual',
            headers: { 'x-forwarded-proto': 'https' },
          })
        ).headers.get('set-cookie') ?? '';
      try {
        expect(await cookie(direct.url)).not.toMatch(/Secure/);
        expect(await cookie(proxied.url)).toMatch(/; Secure/);
      } finally {
        await direct.close();
        await proxied.close();
      }
    });
  });

  it('keeps /metrics behind METRICS_TOKEN when it is set, open otherwise', async () => {
    await withNamespace('http-metrics', async (ns) => {
      const open = await startTestServer(ns.config());
      const closed = await startTestServer(ns.config({ METRICS_TOKEN: METRICS }));
      try {
        expect((await fetch(`${open.url}/metrics`)).status).toBe(200);
        const refused = await fetch(`${closed.url}/metrics`);
        expect(refused.status).toBe(401);
        expect(await refused.json()).toMatchObject({
          error: expect.stringContaining('METRICS_TOKEN'),
        });
        const wrong = { authorization: `Bearer ${DASHBOARD}` };
        expect((await fetch(`${closed.url}/metrics`, { headers: wrong })).status).toBe(401);
        const right = { authorization: `Bearer ${METRICS}` };
        const res = await fetch(`${closed.url}/metrics`, { headers: right });
        expect(res.status).toBe(200);
        expect(await res.text()).toContain('# HELP');
      } finally {
        await open.close();
        await closed.close();
      }
    });
  });
});
