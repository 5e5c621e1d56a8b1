import { afterAll, describe, expect, it } from 'vitest';
import { expectNoLeakedHandles, startTestServer } from './fixture.js';
import { createNamespace } from '../support/namespace.js';
import { usePrivateRedis } from '../support/redis-server.js';

const TOKEN = 'events-unavailable-token-0123';

afterAll(() => expectNoLeakedHandles());

describe('the events routes with Redis down', () => {
  const served = usePrivateRedis();

  it("answer 503 with Retry-After and RedisUnavailableError's code", async () => {
    const ns = createNamespace('events-down', served().server.url);
    ns.redis.on('error', () => {}); // The server is stopped on purpose.
    const app = await startTestServer(ns.config({ EVENTS_TOKEN: TOKEN }));
    const auth = { authorization: `Bearer ${TOKEN}` };
    try {
      expect((await fetch(`${app.url}/v1/events`, { headers: auth })).status).toBe(200);
      await served().server.stop();
      for (const path of ['/v1/events', '/v1/events/stream?after=1-0']) {
        const res = await fetch(`${app.url}${path}`, { headers: auth });
        expect([res.status, res.headers.get('retry-after')], path).toEqual([503, '1']);
        expect(((await res.json()) as { code?: string }).code, path).toBe('redis_unavailable');
      }
    } finally {
      await app.close();
      await served().server.restart();
      await ns.cleanup();
    }
  });
});
