import { afterEach, describe, expect, it } from 'vitest';
import type { SettingName } from '../../src/config/index.js';
import { webhookAdminFor } from '../../src/webhooks/index.js';
import { WEBHOOK_NAMES } from '../../src/telemetry/names.js';
import { eventually } from '../support/namespace.js';
import { useService } from '../support/service.js';
import {
  startWebhookReceiver,
  TEST_WEBHOOK_SECRET,
  verify,
  type Answer,
  type WebhookReceiver,
} from '../support/webhook-receiver.js';
import {
  metricValue,
  publishEvents,
  startDeliverer,
  type TestDeliverer,
} from '../support/webhooks.js';

describe('webhook deliveries', () => {
  const { simulator, ns, start } = useService('webhooks', { workTimeMs: 150 });
  const receivers: WebhookReceiver[] = [];
  const deliverers: TestDeliverer[] = [];
  afterEach(async () => {
    await Promise.all(deliverers.splice(0).map((d) => d.role.close()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  const receiver = async (answer?: Answer) => {
    const started = await startWebhookReceiver(answer);
    receivers.push(started);
    return started;
  };
  const deliverer = async (
    settings: Partial<Record<SettingName, string>>,
    claimIdleMs?: number,
  ) => {
    const config = ns().config({ SHUTDOWN_TIMEOUT: '2s', ...settings });
    const started = await startDeliverer(ns(), config, claimIdleMs);
    deliverers.push(started);
    return started;
  };
  const staticTo = (url: string) => ({ WEBHOOK_URL: url, WEBHOOK_SECRET: TEST_WEBHOOK_SECRET });

  it('delivers every follow-up event once by webhook-id, signed, through a 500 on each first attempt', async () => {
    const hooks = await receiver(({ attempt }) => ({ status: attempt === 1 ? 500 : 204 }));
    await deliverer(staticTo(hooks.url));
    const service = start();
    for (const job of ['j1', 'j2', 'j3']) simulator().seedJob('p1', job);
    const results = await service.producer.sendMany(
      ['j1', 'j2', 'j3'].flatMap((jobId) =>
        [1, 2].map((n) => ({ projectId: 'p1', jobId, prompt: `${jobId} #${n}` })),
      ),
    );
    const delivered = await eventually(
      () => (new Set(hooks.delivered()).size >= results.length ? hooks.delivered() : undefined),
      { timeoutMs: 45_000, what: 'a delivery of each event' },
    );
    expect(delivered).toHaveLength(results.length);
    expect(new Set(delivered).size).toBe(results.length);
    for (const id of delivered)
      expect(hooks.received.filter((r) => r.id === id).map((r) => r.status)).toEqual([500, 204]);
    expect(hooks.received.every((r) => verify(TEST_WEBHOOK_SECRET, r))).toBe(true);
    const bodies = hooks.received.filter((r) => r.status === 204).map((r) => JSON.parse(r.body));
    expect(new Set(bodies.map((b) => b.dispatchId))).toEqual(
      new Set(results.map((r) => r.dispatchId)),
    );
    expect(
      bodies.every((b) => b.type === 'followup.completed' && b.job?.status === 'completed'),
    ).toBe(true);
  });

  it('disables a subscription whose receiver answers 410, and sends it nothing more', async () => {
    const gone = await receiver(() => ({ status: 410 }));
    const witness = await receiver();
    const admin = webhookAdminFor(ns().config());
    try {
      const added = await admin.add({ url: gone.url });
      expect(added.secret).toMatch(/^whsec_/);
      await deliverer({});
      await publishEvents(ns(), ['d-1']);
      await eventually(async () => ((await admin.list())[0]?.disabledAt ? true : undefined), {
        what: 'the subscription disabled',
      });
      await admin.add({ url: witness.url });
      await publishEvents(ns(), ['d-2']);
      await eventually(() => (witness.delivered().length === 1 ? true : undefined), {
        what: 'd-2 at the witness',
      });
      expect(gone.received.map((r) => JSON.parse(r.body).dispatchId)).toEqual(['d-1']);
      expect(verify(added.secret, gone.received[0]!)).toBe(true);
      expect(JSON.stringify(await admin.list())).not.toContain('whsec_');
    } finally {
      await admin.close();
    }
  });

  it('does not follow a redirect: the delivery fails and ends dead', async () => {
    const elsewhere = await receiver();
    const bouncing = await receiver(() => ({ status: 307, location: elsewhere.url }));
    await deliverer({ ...staticTo(bouncing.url), WEBHOOK_MAX_AGE: '1s' });
    const admin = webhookAdminFor(ns().config(staticTo(bouncing.url)));
    try {
      await publishEvents(ns(), ['d-redirected']);
      const [dead] = await eventually(
        async () => {
          const all = await admin.dead();
          return all.length > 0 ? all : undefined;
        },
        { what: 'the dead letter' },
      );
      expect(dead).toMatchObject({
        dispatchId: 'd-redirected',
        reason: expect.stringContaining('307'),
      });
      expect(bouncing.received.length).toBeGreaterThanOrEqual(1);
      expect(elsewhere.received).toEqual([]);
    } finally {
      await admin.close();
    }
  });

  it('dead-letters a delivery after WEBHOOK_MAX_AGE and delivers it on redrive', async () => {
    let failing = true;
    const hooks = await receiver(() => ({ status: failing ? 500 : 200 }));
    const settings = { ...staticTo(hooks.url), WEBHOOK_MAX_AGE: '2s' };
    const { metrics } = await deliverer(settings);
    const admin = webhookAdminFor(ns().config(settings));
    try {
      await publishEvents(ns(), ['d-dead']);
      await eventually(() => (hooks.received.length > 0 ? true : undefined), {
        what: 'a first attempt',
      });
      expect(await metricValue(metrics, WEBHOOK_NAMES.oldestMetric)).toBeGreaterThan(0);
      const [dead] = await eventually(
        async () => {
          const all = await admin.dead();
          return all.length > 0 ? all : undefined;
        },
        { what: 'the dead letter' },
      );
      expect(dead?.attempts).toBeGreaterThanOrEqual(2);
      expect(await metricValue(metrics, WEBHOOK_NAMES.deliveriesMetric, { outcome: 'dead' })).toBe(
        1,
      );
      expect(await metricValue(metrics, WEBHOOK_NAMES.oldestMetric)).toBe(0);
      failing = false;
      expect(await admin.redrive()).toEqual({ redriven: 1 });
      await eventually(() => (hooks.delivered().length === 1 ? true : undefined), {
        what: 'the redriven delivery',
      });
      expect(hooks.delivered()).toEqual([dead?.webhookId]);
      expect(new Set(hooks.received.map((r) => r.id)).size).toBe(1);
      expect(await admin.dead()).toEqual([]);
      expect(
        await metricValue(metrics, WEBHOOK_NAMES.deliveriesMetric, { outcome: 'delivered' }),
      ).toBe(1);
    } finally {
      await admin.close();
    }
  });

  it('two deliverers do not deliver one event twice', async () => {
    const hooks = await receiver();
    await deliverer(staticTo(hooks.url));
    await deliverer(staticTo(hooks.url));
    const ids = Array.from({ length: 40 }, (_, i) => `d-${i}`);
    await publishEvents(ns(), ids);
    await eventually(() => (hooks.received.length >= ids.length ? true : undefined), {
      what: '40 deliveries',
    });
    const bodies = hooks.received.map((r) => JSON.parse(r.body).dispatchId as string);
    expect(bodies.sort()).toEqual([...ids].sort());
    expect(new Set(hooks.received.map((r) => r.id)).size).toBe(ids.length);
  });

  it('takes over the events a dead deliverer had read but not queued', async () => {
    const hooks = await receiver();
    const settings = staticTo(hooks.url);
    await deliverer(settings);
    // The events a deliverer that died read (pending in the group under its name), never acked.
    await deliverers.splice(0)[0]?.role.close();
    await publishEvents(ns(), ['d-a', 'd-b', 'd-c']);
    const taken = await ns().redis.xreadgroup(
      'GROUP',
      'agent-dispatch:webhooks',
      'dead',
      'COUNT',
      10,
      'STREAMS',
      ns().eventsStream,
      '>',
    );
    expect((taken as [string, unknown[]][])[0]?.[1]).toHaveLength(3);
    await deliverer(settings, 300);
    await eventually(() => (hooks.received.length >= 3 ? true : undefined), {
      what: 'the claimed events',
    });
    expect(hooks.received.map((r) => JSON.parse(r.body).dispatchId).sort()).toEqual([
      'd-a',
      'd-b',
      'd-c',
    ]);
  });
});
