import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { eventually, useNamespace } from '../support/namespace.js';
import { TEST_API_KEY } from '../support/simulator.js';

describe('signals and output of a role process', () => {
  const ns = useNamespace('signals', { scope: 'all' });

  /** A worker that logs at info (so it writes while it stops), up once `role:started` shows. */
  async function startedWorker() {
    const env = ns().env({
      AGENT_API_KEY: TEST_API_KEY,
      AGENT_API_URL: 'http://127.0.0.1:9',
      LOG_LEVEL: 'info',
    });
    const worker = runCli(['worker'], env);
    await eventually(
      async () => (worker.output.stdout.includes('role:started') ? true : undefined),
      {
        timeoutMs: 30_000,
        what: 'the worker to start',
      },
    );
    return worker;
  }

  it('keeps running on SIGHUP (it re-reads a key file, where there is one) and stops on SIGTERM', async () => {
    const worker = await startedWorker();
    worker.child.kill('SIGHUP');
    worker.child.kill('SIGHUP');
    await new Promise((r) => setTimeout(r, 500));
    expect(worker.child.exitCode).toBeNull();
    expect(worker.child.signalCode).toBeNull();
    expect(await worker.stop('SIGTERM')).toBe(0);
    expect(worker.output.stdout).toContain('role:stopped');
  });

  it('stops on SIGTERM, exit 0, when nobody reads its output any more (a closed pipe)', async () => {
    // `start` writes progress to stderr and logs to stdout, as `... 2>&1 | head -2` leaves it.
    const start = runCli(['start', '--simulator', '--port', '0'], ns().env({ LOG_LEVEL: 'info' }));
    await eventually(
      async () => (start.output.stderr.includes('follow-ups page:') ? true : undefined),
      {
        timeoutMs: 30_000,
        what: 'start to serve',
      },
    );
    start.child.stdout?.destroy();
    start.child.stderr?.destroy();
    expect(await start.stop('SIGTERM')).toBe(0);
  });
});
