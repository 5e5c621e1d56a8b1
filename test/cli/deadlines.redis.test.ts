import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliToEnd } from '../support/cli.js';
import { useNamespace } from '../support/namespace.js';

/** `enqueue --ttl`, `--expires-at` and the same fields of `enqueue --file` lines. */
describe('deadlines on the command line', () => {
  const ns = useNamespace('cli-deadlines', { scope: 'all' });
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-deadlines-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const status = async (dispatchId: string) =>
    JSON.parse((await runCliToEnd(['status', dispatchId], ns().env())).stdout) as Record<
      string,
      unknown
    >;
  const base = ['enqueue', '--project', 'p', '--job', 'j', '--prompt', 'hi'];

  it('enqueues with --ttl or --expires-at, and status shows the deadline', async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const withTtl = await runCliToEnd([...base, '--ttl', '30m'], ns().env());
    const withDate = await runCliToEnd([...base, '--expires-at', expiresAt], ns().env());
    expect([withTtl.code, withDate.code]).toEqual([0, 0]);
    const ttlState = await status(
      (JSON.parse(withTtl.stdout) as { dispatchId: string }).dispatchId,
    );
    const ttlMs = Date.parse(String(ttlState['expiresAt'])) - Date.now();
    expect(ttlMs).toBeGreaterThan(25 * 60_000);
    expect(ttlMs).toBeLessThanOrEqual(30 * 60_000);
    const dateState = await status(
      (JSON.parse(withDate.stdout) as { dispatchId: string }).dispatchId,
    );
    expect(dateState).toMatchObject({ state: 'queued', expiresAt });
  });

  it('refuses a bad deadline with exit 2 naming the field', async () => {
    const zero = await runCliToEnd([...base, '--ttl', '0s'], ns().env());
    const past = await runCliToEnd([...base, '--expires-at', '2020-01-01T00:00:00Z'], ns().env());
    const both = await runCliToEnd(
      [...base, '--ttl', '5m', '--expires-at', new Date(Date.now() + 60_000).toISOString()],
      ns().env(),
    );
    expect([zero.code, past.code, both.code]).toEqual([2, 2, 2]);
    expect(zero.stderr).toContain('ttl: must be more than 0');
    expect(past.stderr).toContain('expiresAt: must be in the future');
    expect(both.stderr).toContain('expiresAt: give either ttl or expiresAt, not both');
    const mixed = await runCliToEnd(['enqueue', '--file', 'x.ndjson', '--ttl', '5m'], ns().env());
    expect(mixed.code).toBe(2);
  });

  it('takes ttl and expiresAt from --file lines, a bad one a line error', async () => {
    const file = join(dir, 'deadlines.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'a', ttl: '2h' }),
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'b', ttl: 'later' }),
        JSON.stringify({
          projectId: 'p',
          jobId: 'j',
          prompt: 'c',
          expiresAt: '2020-01-01T00:00:00Z',
        }),
      ].join('\n'),
    );
    const result = await runCliToEnd(['enqueue', '--file', file], ns().env());
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('line 2: ttl: must be a duration such as');
    expect(result.stderr).toContain('line 3: expiresAt: must be in the future');
    const printed = JSON.parse(result.stdout.trim()) as { line: number; dispatchId: string };
    expect(printed.line).toBe(1);
    const deadline = Date.parse(String((await status(printed.dispatchId))['expiresAt']));
    expect(Math.abs(deadline - (Date.now() + 2 * 3_600_000))).toBeLessThan(5 * 60_000);
  });
});
