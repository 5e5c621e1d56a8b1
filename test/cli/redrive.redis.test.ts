import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/dispatch/event.js';
import { DispatchStore } from '../../src/store/store.js';
import { createProducer } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { runCliToEnd } from '../support/cli.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

/** `agent-dispatch redrive` as a process: by ids, by a filter, a dry run, and a refusal. */
describe('agent-dispatch redrive', () => {
  const ns = useNamespace('cli-redrive', { scope: 'all' });
  const producer = useOpened(
    'producer',
    () => createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix }),
    'all',
  );
  const run = (...args: string[]) => runCliToEnd(args, ns().env());
  const lines = (stdout: string) =>
    stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  /** A follow-up of project `projectId` ended undeliverable with `reason`. */
  async function deadLetter(projectId: string, jobId: string, reason: string) {
    const store = new DispatchStore(ns().redis, keysFor(ns().prefix), {
      eventsStream: ns().eventsStream,
      eventsMaxLen: 1000,
      retentionMs: 600_000,
    });
    const { dispatchId } = await producer().send({ projectId, jobId, prompt: `p ${jobId}` });
    const record = await store.sends.get(dispatchId);
    await store.finish(record!, { type: EVENT_TYPES.undeliverable, reason });
    return dispatchId;
  }

  it('redrives by a filter (after a dry run), then by id, idempotently; refuses one not ended', async () => {
    const a = await deadLetter('docs', 'a', 'not_found');
    const b = await deadLetter('docs', 'b', 'http_400');
    const other = await deadLetter('web', 'c', 'not_found');

    const dry = await run('redrive', '--project', 'docs', '--reason', 'not_found', '--dry-run');
    expect(dry.code).toBe(0);
    expect(lines(dry.stdout)).toMatchObject([{ dispatchId: a, reason: 'not_found' }]);
    expect(await ns().redis.hget(keysFor(ns().prefix).dispatch(a), 'redrivenTo')).toBeNull();

    const byFilter = await run('redrive', '--project', 'docs', '--reason', 'not_found');
    expect(byFilter.code).toBe(0);
    const [first] = lines(byFilter.stdout);
    expect(first).toMatchObject({ dispatchId: a, created: true });

    const byIds = await run('redrive', a, b);
    expect(byIds.code).toBe(0);
    expect(lines(byIds.stdout)).toMatchObject([
      { dispatchId: a, redrivenTo: first?.['redrivenTo'], created: false },
      { dispatchId: b, created: true },
    ]);
    const { dispatchId: queued } = await producer().send({
      projectId: 'web',
      jobId: 'q',
      prompt: 'q',
    });
    const refused = await run('redrive', other, queued);
    expect(refused.code).toBe(1);
    expect(lines(refused.stdout)).toMatchObject([
      { dispatchId: other, created: true },
      { dispatchId: queued, why: 'not_ended' },
    ]);
    expect((await run('redrive')).code).toBe(2);
  }, 60_000);
});
