import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createProducer } from '../../src/producer/index.js';
import { useNamespace } from '../support/namespace.js';
import { expectNoLeakedHandles, startTestServer, type TestServer } from './fixture.js';

const TOKEN = 'backlog-intake-token-0123';

afterAll(() => expectNoLeakedHandles());

/** The intake of a project whose backlog is full: 429, Retry-After, nothing enqueued. */
describe('the intake with a backlog limit', () => {
  const ns = useNamespace('http-backlog');
  let app: TestServer | undefined;
  afterEach(async () => {
    await app?.close();
  });

  it('answers 429 with Retry-After in whole seconds and the code, enqueueing nothing', async () => {
    const config = ns().config({ INTAKE_TOKEN: TOKEN });
    const producer = createProducer({
      redisUrl: ns().redisUrl,
      prefix: ns().prefix,
      projectBacklogMax: 2,
      sendRateLimit: '7/1m',
    });
    app = await startTestServer(config, { producer });
    const post = (body: unknown) =>
      fetch(`${app?.url}/v1/followups`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const item = (prompt: string) => ({ projectId: 'p1', jobId: `j-${prompt}`, prompt });
    expect((await post([item('a'), item('b')])).status).toBe(202);
    const refused = await post([item('c'), item('d')]);
    expect(refused.status).toBe(429);
    // Two over at 7 a minute: 17,143 ms, 18 s.
    expect(refused.headers.get('retry-after')).toBe('18');
    expect(await refused.json()).toMatchObject({
      code: 'backlog_full',
      projectId: 'p1',
      retryAfterMs: 17_143,
    });
    const keys = await ns().redis.keys(`${ns().prefix}:d:*`);
    expect(keys).toHaveLength(2);
    // Another project is not held back.
    expect((await post({ ...item('e'), projectId: 'p2' })).status).toBe(202);
  });
});
