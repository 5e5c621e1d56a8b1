import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliToEnd } from '../support/cli.js';
import { useNamespace } from '../support/namespace.js';

/** `PROJECT_BACKLOG_MAX` on the command line: a line past it is a line error, the rest go on. */
describe('enqueue with a backlog limit', () => {
  const ns = useNamespace('cli-backlog');
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-backlog-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses only the lines past the limit in enqueue --file, and says so per line', async () => {
    const file = join(dir, 'backlog.ndjson');
    const line = (projectId: string, prompt: string) =>
      JSON.stringify({ projectId, jobId: `j-${prompt}`, prompt });
    writeFileSync(
      file,
      [
        line('p1', 'a'),
        line('p1', 'b'),
        line('p1', 'c'),
        line('p2', 'd'),
        'not json',
        line('p1', 'e'),
      ].join('\n'),
    );
    const env = ns().env({ PROJECT_BACKLOG_MAX: '2' });
    const result = await runCliToEnd(['enqueue', '--file', file], env);
    expect(result.code).toBe(1);
    // 2 queued, one over at 100/1h: 36 s.
    const full = 'projectId: backlog full (2 not yet sent); retry in 36 s';
    expect(result.stderr).toContain(`line 3: ${full}`);
    expect(result.stderr).toContain('line 5: not valid JSON');
    expect(result.stderr).toContain(`line 6: ${full}`);
    expect(result.stderr).toContain('6 lines, 3 enqueued, 0 deduplicated, 3 bad');
    const printed = result.stdout
      .trim()
      .split('\n')
      .map((text) => (JSON.parse(text) as { line: number }).line);
    expect(printed).toEqual([1, 2, 4]);
    // One follow-up alone: refused, with the error's code.
    const one = await runCliToEnd(
      ['enqueue', '--project', 'p1', '--job', 'j', '--prompt', 'f'],
      env,
    );
    expect(one.code).not.toBe(0);
    expect(one.stderr).toContain('backlog_full');
  });
});
