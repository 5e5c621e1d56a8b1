import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { useClusterFleet } from '../support/cluster-fleet.js';
import { eventually } from '../support/namespace.js';
import { useSimulator } from '../support/simulator.js';
import {
  startWebhookReceiver,
  TEST_WEBHOOK_SECRET,
  verify,
  type WebhookReceiver,
} from '../support/webhook-receiver.js';
import { publishEvents, startDeliverer } from '../support/webhooks.js';

describe('webhooks on a Redis Cluster of 3 masters, DISPATCH_SHARDS=3', () => {
  const simulator = useSimulator();
  const fleet = useClusterFleet(simulator, { masters: 3, shards: 3 });
  let hooks: WebhookReceiver | undefined;
  afterAll(() => hooks?.close());

  it("delivers the events of every shard's stream, each once, signed", async () => {
    hooks = await startWebhookReceiver(({ attempt }) => ({ status: attempt === 1 ? 503 : 200 }));
    const { redis } = fleet();
    const config = loadConfig(
      fleet().env({ WEBHOOK_URL: hooks.url, WEBHOOK_SECRET: TEST_WEBHOOK_SECRET }),
    );
    const shards = fleet().shards();
    const [first] = shards;
    const { role } = await startDeliverer(
      { redis, eventsStream: first?.eventsStream ?? '' },
      config,
    );
    try {
      for (const shard of shards) {
        await eventually(
          async () => ((await redis.exists(shard.eventsStream)) ? true : undefined),
          {
            what: `the group on shard ${shard.index}`,
          },
        );
        await publishEvents({ redis, eventsStream: shard.eventsStream }, [
          `s${shard.index}-a`,
          `s${shard.index}-b`,
        ]);
      }
      await eventually(() => (hooks && hooks.delivered().length >= 6 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'six deliveries',
      });
      const delivered = hooks.received.filter((r) => r.status === 200);
      expect(delivered.map((r) => JSON.parse(r.body).dispatchId).sort()).toEqual([
        's0-a',
        's0-b',
        's1-a',
        's1-b',
        's2-a',
        's2-b',
      ]);
      expect(new Set(delivered.map((r) => r.id)).size).toBe(6);
      expect(hooks.received.every((r) => verify(TEST_WEBHOOK_SECRET, r))).toBe(true);
    } finally {
      await role.close();
    }
  });
});
