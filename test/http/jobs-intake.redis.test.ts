import { afterAll, describe, expect, it } from 'vitest';
import { expectNoLeakedHandles, useTestServer } from './fixture.js';

const TOKEN = 'intake-secret-token';

afterAll(() => expectNoLeakedHandles());

/** `POST /v1/jobs`: creations through the intake (docs/creations.md). */
describe('POST /v1/jobs', () => {
  const served = useTestServer('jobs-intake', { INTAKE_TOKEN: TOKEN }, () => ({
    withProducer: true,
  }));

  const post = (path: string, body: unknown) =>
    fetch(`${served.app.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const get = (dispatchId: string) =>
    fetch(`${served.app.url}/v1/followups/${dispatchId}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });

  it('accepts one creation or an array (202), and status shows kind create', async () => {
    const one = await post('/v1/jobs', { projectId: 'p1', prompt: 'new job', key: 'j-1' });
    expect(one.status).toBe(202);
    const { dispatchId } = (await one.json()) as { dispatchId: string };
    expect(await (await get(dispatchId)).json()).toMatchObject({
      kind: 'create',
      state: 'queued',
      jobId: '',
      after: null,
    });
    const again = await post('/v1/jobs', { projectId: 'p1', prompt: 'new job', key: 'j-1' });
    expect(await again.json()).toEqual({ dispatchId, deduplicated: true });
    const many = await post('/v1/jobs', [
      { projectId: 'p1', prompt: 'a' },
      { projectId: 'p2', prompt: 'b' },
    ]);
    expect(many.status).toBe(202);
    expect(((await many.json()) as { results: unknown[] }).results).toHaveLength(2);
    // A follow-up chained to it by key, through the follow-ups' intake.
    const chained = await post('/v1/followups', { projectId: 'p1', after: 'j-1', prompt: 'next' });
    expect(chained.status).toBe(202);
    const chainedId = ((await chained.json()) as { dispatchId: string }).dispatchId;
    expect(await (await get(chainedId)).json()).toMatchObject({
      kind: 'followup',
      after: dispatchId,
      jobId: '',
    });
  });

  it('answers 400 naming the field: a jobId on a creation, an after naming no creation', async () => {
    const withJob = await post('/v1/jobs', { projectId: 'p1', jobId: 'j', prompt: 'x' });
    expect(withJob.status).toBe(400);
    expect(await withJob.json()).toMatchObject({ problems: [{ field: 'jobId' }] });
    const unknown = await post('/v1/followups', { projectId: 'p1', after: 'nope', prompt: 'x' });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ problems: [{ field: 'after' }] });
    const empty = await post('/v1/jobs', []);
    expect(empty.status).toBe(400);
  });
  it('answers 409 on field after for a follow-up chained to a creation refused for its key', async () => {
    await post('/v1/jobs', { projectId: 'p1', prompt: 'first', key: 'j-taken' });
    const refused = await post('/v1/followups', [
      { create: true, projectId: 'p1', prompt: 'other', key: 'j-taken' },
      { projectId: 'p1', after: 'j-taken', prompt: 'chained' },
    ]);
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({
      problems: [
        { index: 0, field: 'key' },
        { index: 1, field: 'after', message: expect.stringContaining('was refused') },
      ],
    });
  });
});
