import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidFollowUpError } from '../../src/producer/index.js';
import { runCliToEnd } from '../support/cli.js';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

const TOKEN = 'json-input-intake-token';

afterAll(() => expectNoLeakedHandles());

/** `projectId` misspelled, as a hand-written client would. */
const MISSPELLED = { projectid: 'p', jobId: 'j', prompt: 'hello' };

describe('JSON as clients send it', () => {
  const served = useTestServer('json-input', { INTAKE_TOKEN: TOKEN }, () => ({
    withProducer: true,
  }));
  const post = (body: unknown) =>
    fetch(`${served.app.url}/v1/followups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('takes null as absent for key and meta, over HTTP and in the library', async () => {
    const res = await post({ projectId: 'p', jobId: 'j', prompt: 'a', key: null, meta: null });
    expect(res.status).toBe(202);
    const { dispatchId } = (await res.json()) as { dispatchId: string };
    expect(await served.app.producer?.status(dispatchId)).toMatchObject({ key: null });
    const sent = await served.app.producer?.send({
      projectId: 'p',
      jobId: 'j',
      prompt: 'b',
      key: null,
      meta: null,
    });
    expect(sent?.deduplicated).toBe(false);
  });

  it('names an unknown field first, and not the field it was meant as', async () => {
    const res = await post(MISSPELLED);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: 'invalid follow-up',
      code: 'invalid_followup',
      problems: [
        { field: 'projectid', message: 'unknown field projectid (did you mean projectId?)' },
      ],
    });
    const batch = await post({ followups: [{ ...MISSPELLED, projectId: 'p', colour: 'red' }] });
    expect(await batch.json()).toMatchObject({
      problems: [
        { field: 'projectid', index: 0 },
        { field: 'colour', index: 0 },
      ],
    });
    const wrapper = await post({ followups: [{ projectId: 'p', jobId: 'j', prompt: 'c' }], x: 1 });
    expect(wrapper.status).toBe(400);
    expect(await wrapper.json()).toMatchObject({
      problems: [{ message: expect.stringContaining('unknown field x') }],
    });
    const thrown = await served.app.producer
      ?.send(MISSPELLED as never)
      .catch((err: unknown) => err);
    expect(thrown).toBeInstanceOf(InvalidFollowUpError);
    expect((thrown as Error).message).toBe(
      'projectid: unknown field projectid (did you mean projectId?)',
    );
  });

  it('does the same in enqueue --file: null accepted, an unknown field a line error naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-json-'));
    try {
      const file = join(dir, 'in.ndjson');
      const lines = [
        { projectId: 'p', jobId: 'j', prompt: 'd', key: null, meta: null },
        MISSPELLED,
      ];
      writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n'));
      const result = await runCliToEnd(['enqueue', '--file', file], served.ns.env());
      expect(result.stdout).toMatch(/"line":1/);
      expect(result.stderr).toContain(
        'line 2: projectid: unknown field projectid (did you mean projectId?)\n',
      );
      expect(result.code).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
