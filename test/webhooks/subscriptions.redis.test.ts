import { describe, expect, it } from 'vitest';
import { cachedSubscriptions } from '../../src/webhooks/deliverer.js';
import { SubscriptionStore, wants } from '../../src/webhooks/subscriptions.js';
import { useNamespace } from '../support/namespace.js';

describe('webhook subscriptions', () => {
  const ns = useNamespace('webhook-subs');

  it("finds a subscription added after the cache was read (another process's delivery)", async () => {
    const config = ns().config();
    const cache = cachedSubscriptions(ns().redis, config);
    expect(await cache.get()).toEqual([]);
    const added = await new SubscriptionStore(ns().redis, config).add({
      url: 'http://127.0.0.1:9/',
      projects: [],
      types: [],
    });
    expect((await cache.find(added.id))?.secret).toBe(added.secret);
  });

  it('filters by project, by type or family, and by when it was added', () => {
    const base = { id: 's', url: 'u', secret: 'x', createdAt: 1_000, kind: 'managed' as const };
    const sub = { ...base, projects: ['p1'], types: ['followup.completed', 'job.*'] };
    const at = (type: string, projectId = 'p1', publishedAt = 2_000) => ({
      type,
      projectId,
      publishedAt,
    });
    expect(wants(sub, at('followup.completed'))).toBe(true);
    expect(wants(sub, at('job.failed'))).toBe(true);
    expect(wants(sub, at('followup.failed'))).toBe(false);
    expect(wants(sub, at('followup.completed', 'p2'))).toBe(false);
    expect(wants(sub, at('followup.completed', 'p1', 999))).toBe(false);
    expect(wants({ ...sub, disabledAt: 1_500 }, at('followup.completed'))).toBe(false);
    expect(wants({ ...base, projects: [], types: [] }, at('anything', 'any'))).toBe(true);
  });
});
