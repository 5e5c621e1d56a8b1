import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { fleetEnv, useFleet } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { freePort } from '../support/redis-server.js';
import { useSimulator } from '../support/simulator.js';

describe('a worker process with METRICS_PORT', () => {
  const simulator = useSimulator();
  const fleet = useFleet('metrics-port', simulator);

  it('serves its own readiness and metrics, in-flight limit included', async () => {
    const port = await freePort();
    const env = fleetEnv(fleet().ns, simulator(), {
      METRICS_PORT: String(port),
      WORKER_CONCURRENCY: '7',
    });
    const worker = runCli(['worker'], env);
    fleet().processes = [worker];
    const base = `http://127.0.0.1:${port}`;
    const ready = await eventually(
      async () => {
        const res = await fetch(`${base}/readyz`).catch(() => undefined);
        return res?.status === 200 ? ((await res.json()) as Record<string, unknown>) : undefined;
      },
      { timeoutMs: 30_000, what: 'the worker to be ready' },
    );
    expect(ready).toMatchObject({ status: 'ready', checks: { redis: 'ok', 'role:worker': 'ok' } });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^agent_dispatch_worker_inflight_limit\{worker="[^"]+"\} 7$/m);
    expect((await fetch(`${base}/dashboard`)).status).toBe(404);
    expect(await worker.stop('SIGTERM')).toBe(0);
  }, 60_000);
});
