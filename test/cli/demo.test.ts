import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, runCliToEnd } from '../support/cli.js';
import { eventually } from '../support/namespace.js';

/** What a newcomer does after `npm start`: other commands in the same folder, a second start. */
describe('the demo of agent-dispatch start, from the folder it runs in', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'agent-dispatch-demo-'));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));
  const env = { HTTP_PORT: '0', LOG_LEVEL: 'warn' };

  async function started() {
    const proc = runCli(['start'], env, { cwd });
    const url = await eventually(
      () => /running a private .+? at (redis:\/\/\S+)/.exec(proc.output.stderr)?.[1],
      { timeoutMs: 30_000, what: 'the private Redis line' },
    );
    await eventually(() => /follow-ups page: \S+/.exec(proc.output.stderr)?.[0], {
      timeoutMs: 30_000,
      what: 'the follow-ups page line',
    });
    // The demo makes a token for each scope and says how to use it.
    await eventually(() => /operator: \S+.* "Authorization: Bearer \w+"/.exec(proc.output.stderr), {
      timeoutMs: 30_000,
      what: 'the operator line',
    });
    expect(proc.output.stderr).toMatch(/events: GET \S+\/v1\/events .*"Authorization: Bearer \w+"/);
    return { proc, url };
  }

  it('lets other commands find its Redis without REDIS_URL, refuses a second start, keeps its URL', async () => {
    const first = await started();
    try {
      const status = await runCliToEnd(['status', 'no-such-dispatch'], {}, { cwd });
      expect(status.stderr).toContain(
        `REDIS_URL is not set: using the demo's Redis at ${first.url}`,
      );
      expect(status.code).toBe(1);
      expect(status.stderr).not.toMatch(/REDIS_URL: is required/);

      const second = await runCliToEnd(['start'], env, { cwd });
      expect(second.code).not.toBe(0);
      expect(second.stderr).toMatch(/another `agent-dispatch start` is running/);
    } finally {
      expect(await first.proc.stop('SIGTERM')).toBe(0);
    }

    const alone = await runCliToEnd(['status', 'no-such-dispatch'], {}, { cwd });
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/REDIS_URL/);

    const again = await started();
    try {
      expect(again.url).toBe(first.url);
    } finally {
      expect(await again.proc.stop('SIGTERM')).toBe(0);
    }
  }, 120_000);

  it('names an unknown option in one line', async () => {
    const run = await runCliToEnd(['enqueue', '--bogus'], {}, { cwd });
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe(
      'agent-dispatch: unknown option --bogus; run agent-dispatch enqueue --help',
    );
  });
});
