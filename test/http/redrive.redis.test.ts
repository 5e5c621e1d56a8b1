import { afterAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { DispatchStore } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { bearerCall, expectNoLeakedHandles, useTestServer } from './fixture.js';

const OPERATOR = 'redrive-operator-token';
const INTAKE = 'redrive-intake-token';

afterAll(() => expectNoLeakedHandles());

/**
 * `POST /v1/redrive` against a real Redis: dead letters chosen by filter or by id, a dry run that
 * sends nothing, idempotent, the operator's scope only, a bad body a 400 naming the field; and
 * the status of both follow-ups shows their link. No role runs: nothing sends the new ones.
 */
describe('POST /v1/redrive', () => {
  const served = useTestServer(
    'http-redrive',
    {
      OPERATOR_TOKEN: OPERATOR,
      INTAKE_TOKEN: INTAKE,
    },
    () => ({ withProducer: true }),
  );
  const call = bearerCall(served, OPERATOR);
  const results = async (res: Response) =>
    ((await res.json()) as { results: Record<string, unknown>[] }).results;

  /** A follow-up of `projectId` ended undeliverable with `reason`, its end moved back `agoMs`. */
  async function deadLetter(projectId: string, jobId: string, reason: string, agoMs = 0) {
    const { ns, app } = served;
    const keys = keysFor(ns.prefix);
    const store = new DispatchStore(ns.redis, keys, {
      eventsStream: ns.eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 600_000,
    });
    const { dispatchId } = await app.producer!.send({ projectId, jobId, prompt: `p ${jobId}` });
    await store.finish((await store.sends.get(dispatchId))!, {
      type: EVENT_TYPES.undeliverable,
      reason,
    });
    if (agoMs > 0) await ns.redis.zadd(keys.deadLetters, Date.now() - agoMs, dispatchId);
    return dispatchId;
  }
  const queuedJobs = () => served.ns.redis.llen(keysFor(served.ns.prefix).dispatchQueue('wait'));

  it('refuses another scope with 403 and a bad body with 400 naming the field; changes nothing', async () => {
    const dead = await deadLetter('scope', 's', 'not_found');
    const before = await queuedJobs();
    const intake = await call('POST', '/v1/redrive', {}, INTAKE);
    expect(intake.status).toBe(403);
    expect(await intake.json()).toMatchObject({ scope: 'operator' });
    for (const [body, field] of [
      [{ projekt: 'scope' }, 'projekt'],
      [{ project: 'scope', dryrun: true }, 'dryrun'],
      [{ limit: 0 }, 'limit'],
      [{ limit: 'ten' }, 'limit'],
      [{ since: 'yesterday' }, 'since'],
      [{ dispatchIds: [dead], project: 'scope' }, 'dispatchIds'],
    ] as const) {
      const res = await call('POST', '/v1/redrive', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const answer = (await res.json()) as { problems: { field: string; message: string }[] };
      expect(answer.problems[0]?.field, JSON.stringify(body)).toBe(field);
      if (field.startsWith('p') || field === 'dryrun')
        expect(answer.problems[0]?.message).toMatch(new RegExp(`unknown field ${field}`));
    }
    expect(await queuedJobs()).toBe(before);
    expect(await served.app.producer!.status(dead)).toMatchObject({ redrivenTo: null });
  });

  it('redrives by project, reason and since, oldest end first; a dry run sends nothing; twice creates nothing new', async () => {
    const old = await deadLetter('web', 'old', 'not_found', 3 * 3_600_000);
    const a = await deadLetter('web', 'a', 'not_found', 60_000);
    const b = await deadLetter('web', 'b', 'not_found');
    const other = await deadLetter('web', 'c', 'http_400');
    await deadLetter('docs', 'd', 'not_found');
    const filter = { project: 'web', reason: 'not_found', since: '2h' };

    const before = await queuedJobs();
    const dry = await call('POST', '/v1/redrive', { ...filter, dryRun: true });
    expect(dry.status).toBe(200);
    expect(await results(dry)).toMatchObject([
      { dispatchId: a, projectId: 'web', reason: 'not_found', dryRun: true },
      { dispatchId: b, dryRun: true },
    ]);
    expect(await queuedJobs()).toBe(before);

    const first = await results(await call('POST', '/v1/redrive', { ...filter, limit: null }));
    expect(first).toMatchObject([
      { dispatchId: a, created: true },
      { dispatchId: b, created: true },
    ]);
    expect(await queuedJobs()).toBe(before + 2);
    // Redriven, they left the dead letters: the same filter finds nothing more.
    expect(await results(await call('POST', '/v1/redrive', filter))).toEqual([]);
    const byIds = await results(await call('POST', '/v1/redrive', { dispatchIds: [a, b] }));
    expect(byIds).toEqual(first.map((r) => ({ ...r, created: false })));
    expect(await queuedJobs()).toBe(before + 2);

    // An ISO 8601 time: the old one ended before it, the other reason is left alone.
    const iso = new Date(Date.now() - 4 * 3_600_000).toISOString();
    const older = await results(
      await call('POST', '/v1/redrive', { project: 'web', reason: 'not_found', since: iso }),
    );
    expect(older).toMatchObject([{ dispatchId: old, created: true }]);
    expect(await served.app.producer!.status(other)).toMatchObject({ redrivenTo: null });

    // The status of each shows the link, over HTTP too.
    const fresh = String(first[0]?.['redrivenTo']);
    const status = async (id: string) =>
      (await call('GET', `/v1/followups/${id}`, undefined, INTAKE)).json();
    expect(await status(fresh)).toMatchObject({ redriveOf: a, redrivenTo: null, state: 'queued' });
    expect(await status(a)).toMatchObject({ redriveOf: null, redrivenTo: fresh });
  });

  it('answers each id in turn: a refusal names why', async () => {
    const dead = await deadLetter('ids', 'x', 'not_found');
    const { dispatchId: queued } = await served.app.producer!.send({
      projectId: 'ids',
      jobId: 'q',
      prompt: 'q',
    });
    const before = await queuedJobs();
    const dry = await call('POST', '/v1/redrive', { dispatchIds: [dead, queued], dryRun: true });
    expect(await results(dry)).toMatchObject([
      { dispatchId: dead, dryRun: true },
      { dispatchId: queued, why: 'not_ended' },
    ]);
    expect(await queuedJobs()).toBe(before);
    const res = await call('POST', '/v1/redrive', { dispatchIds: [queued, dead, 'nope'] });
    expect(res.status).toBe(200);
    expect(await results(res)).toMatchObject([
      { dispatchId: queued, why: 'not_ended' },
      { dispatchId: dead, created: true },
      { dispatchId: 'nope', why: 'unknown' },
    ]);
  });
});
