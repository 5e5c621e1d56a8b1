import { afterAll, describe, expect, it } from 'vitest';
import { bearerCall, expectNoLeakedHandles, useTestServer } from './fixture.js';

const TOKEN = 'webhooks-operator-token';

afterAll(() => expectNoLeakedHandles());

describe('/v1/webhooks', () => {
  const served = useTestServer('http-webhooks', { OPERATOR_TOKEN: TOKEN });
  const call = bearerCall(served, TOKEN);

  it('adds, lists and removes a subscription; the secret is shown once, by the add', async () => {
    const added = await call('POST', '/v1/webhooks', {
      url: 'https://hooks.example.com/a',
      projects: ['docs'],
      types: ['followup.*'],
    });
    expect(added.status).toBe(201);
    const subscription = (await added.json()) as { id: string; secret: string };
    expect(subscription).toMatchObject({
      url: 'https://hooks.example.com/a',
      projects: ['docs'],
      types: ['followup.*'],
      secret: expect.stringMatching(/^whsec_/),
    });
    const listed = await call('GET', '/v1/webhooks');
    const text = await listed.text();
    expect(JSON.parse(text)).toMatchObject({
      webhooks: [{ id: subscription.id, kind: 'managed' }],
    });
    expect(text).not.toContain(subscription.secret);
    expect((await call('DELETE', `/v1/webhooks/${subscription.id}`)).status).toBe(200);
    expect((await call('DELETE', `/v1/webhooks/${subscription.id}`)).status).toBe(404);
    expect(await (await call('GET', '/v1/webhooks')).json()).toEqual({ webhooks: [] });
    expect(await (await call('GET', '/v1/webhooks/dead')).json()).toEqual({ dead: [] });
    expect(await (await call('POST', '/v1/webhooks/redrive')).json()).toEqual({ redriven: 0 });
  });

  it('answers 400 naming the field, and 401 without the token', async () => {
    const bad = await call('POST', '/v1/webhooks', { url: 'ftp://x', types: [] });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      code: 'invalid_webhook',
      problems: [{ field: 'url' }],
    });
    const badTypes = await call('POST', '/v1/webhooks', { url: 'http://x.test', types: 'all' });
    expect(await badTypes.json()).toMatchObject({ problems: [{ field: 'types' }] });
    expect((await call('GET', '/v1/webhooks', undefined, 'wrong-token-wrong')).status).toBe(401);
    expect(
      (await call('POST', '/v1/webhooks', { url: 'http://x.test' }, 'nope-nope-nope-no')).status,
    ).toBe(401);
    expect(await (await call('GET', '/v1/webhooks')).json()).toEqual({ webhooks: [] });
  });
});
