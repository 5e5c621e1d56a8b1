import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCliToEnd } from '../support/cli.js';
import { waitForEvents } from '../support/events.js';
import { useService } from '../support/service.js';

/** `agent-dispatch create`, and `enqueue --file` lines that create and chain. */
describe('creations on the command line', () => {
  const { simulator, ns, start } = useService('cli-create', { workTimeMs: 200 });

  it('create prints a dispatch id; a file creates and chains by key; each ends with its event', async () => {
    start();
    const one = await runCliToEnd(['create', '--project', 'p1', '--prompt', 'alone'], ns().env());
    expect(one.code).toBe(0);
    const { dispatchId } = JSON.parse(one.stdout) as { dispatchId: string };
    const dir = mkdtempSync(join(tmpdir(), 'create-'));
    try {
      const file = join(dir, 'lines.ndjson');
      const lines = [
        { create: true, projectId: 'p1', prompt: 'make it', key: 'made' },
        { projectId: 'p1', after: 'made', prompt: 'then this' },
        { projectId: 'p1', after: 'unknown', prompt: 'bad' },
        { create: true, projectId: 'p1', jobId: 'j', prompt: 'bad too' },
      ];
      writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n'));
      const run = await runCliToEnd(['enqueue', '--file', file], ns().env());
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('line 4: jobId: a creation has no jobId');
      expect(run.stderr).toContain('line 3: after: names no creation');
      // Lines 1 and 2 went, each alone once the batch was refused: the creation, then its chain.
      const events = await waitForEvents(ns().redis, ns().eventsStream, 3, 30_000);
      expect(events.find((e) => e.dispatchId === dispatchId)).toMatchObject({
        type: 'job.completed',
      });
      expect(events.map((e) => e.type).sort()).toEqual([
        'followup.completed',
        'job.completed',
        'job.completed',
      ]);
      const status = await runCliToEnd(['status', dispatchId], ns().env());
      expect(JSON.parse(status.stdout)).toMatchObject({ kind: 'create', state: 'done' });
      expect(simulator().deliveries.filter((d) => d.kind === 'create')).toHaveLength(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('a file whose lines create and chain: the follow-up goes to the new job after its run', async () => {
    start();
    const dir = mkdtempSync(join(tmpdir(), 'create-'));
    try {
      const file = join(dir, 'lines.ndjson');
      const lines = [
        { create: true, projectId: 'p1', prompt: 'make it', key: 'made-2' },
        { projectId: 'p1', after: 'made-2', prompt: 'then this' },
      ];
      writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n'));
      const run = await runCliToEnd(['enqueue', '--file', file], ns().env());
      expect(run.code).toBe(0);
      const events = await waitForEvents(ns().redis, ns().eventsStream, 2, 30_000);
      expect(events.map((e) => e.type)).toEqual(['job.completed', 'followup.completed']);
      expect(events[1]!.jobId).toBe(events[0]!.jobId);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
  it('a line chained to a creation refused for its key says so on field after', async () => {
    const service = start({}, { worker: false, poller: false });
    await service.producer.create({ projectId: 'p1', prompt: 'first', key: 'taken' });
    const dir = mkdtempSync(join(tmpdir(), 'create-'));
    try {
      const file = join(dir, 'lines.ndjson');
      const lines = [
        { create: true, projectId: 'p1', prompt: 'other', key: 'taken' },
        { projectId: 'p1', after: 'taken', prompt: 'then this' },
      ];
      writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n'));
      const run = await runCliToEnd(['enqueue', '--file', file], ns().env());
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('line 1: key: already used for a different follow-up');
      expect(run.stderr).toMatch(/line 2: after: its creation \(dispatch \S+\) was refused/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
