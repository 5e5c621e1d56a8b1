import { afterEach, describe, expect, it } from 'vitest';
import { shardLayout } from '../../src/redis/keys.js';
import { startRoles, stopAll, waitForWorkers } from '../support/roles.js';
import type { CliProcess } from '../support/cli.js';
import { eventually, useNamespace } from '../support/namespace.js';
import {
  startWebhookReceiver,
  TEST_WEBHOOK_SECRET,
  verify,
  type WebhookReceiver,
} from '../support/webhook-receiver.js';
import { publishEvents, startDeliverer } from '../support/webhooks.js';

const SHARDS = 2;

describe('webhooks across shards and processes', () => {
  const ns = useNamespace('webhook-fleet', { shards: SHARDS });
  let hooks: WebhookReceiver | undefined;
  const processes: CliProcess[] = [];
  afterEach(async () => {
    await Promise.all(processes.splice(0).map((p) => p.stop('SIGKILL')));
    await hooks?.close();
  });
  const settings = () => ({
    WEBHOOK_URL: hooks?.url ?? '',
    WEBHOOK_SECRET: TEST_WEBHOOK_SECRET,
    DISPATCH_SHARDS: String(SHARDS),
  });
  /** The namespace with the events stream of shard `i` in place of its own. */
  const shard = (i: number) => {
    const layout = shardLayout(ns().prefix, ns().eventsStream, SHARDS, false)[i];
    return { ...ns(), eventsStream: layout?.eventsStream ?? '' };
  };

  it(
    'two poller processes deliver the events of every shard, each once',
    { timeout: 120_000 },
    async () => {
      hooks = await startWebhookReceiver();
      processes.push(...startRoles('poller', 2, ns().env({ ...settings(), LOG_LEVEL: 'warn' })));
      const firstShard = shardLayout(ns().prefix, ns().eventsStream, SHARDS, false)[0];
      await waitForWorkers({ redis: ns().redis, prefix: firstShard?.prefix ?? '' }, 2, {
        queue: 'webhook',
        processes,
      });
      // The groups are made by the first round of a deliverer that sees the static subscription.
      for (const i of [0, 1]) {
        await eventually(
          async () => ((await ns().redis.exists(shard(i).eventsStream)) ? true : undefined),
          { what: `the group on shard ${i}` },
        );
      }
      const ids = Array.from({ length: 30 }, (_, n) => `d-${n}`);
      await publishEvents(shard(0), ids.slice(0, 15));
      await publishEvents(shard(1), ids.slice(15));
      await eventually(() => (hooks && hooks.received.length >= ids.length ? true : undefined), {
        timeoutMs: 60_000,
        what: '30 deliveries',
      });
      const received = hooks.received;
      expect(received.map((r) => JSON.parse(r.body).dispatchId).sort()).toEqual([...ids].sort());
      expect(new Set(received.map((r) => r.id)).size).toBe(ids.length);
      expect(received.every((r) => verify(TEST_WEBHOOK_SECRET, r))).toBe(true);
      await stopAll(processes.splice(0));
    },
  );

  it('one deliverer of both shards, in this process, delivers both', async () => {
    hooks = await startWebhookReceiver();
    const { role } = await startDeliverer(shard(0), ns().config(settings()));
    try {
      await publishEvents(shard(0), ['a']);
      await publishEvents(shard(1), ['b']);
      await eventually(() => (hooks && hooks.received.length >= 2 ? true : undefined), {
        what: 'both deliveries',
      });
      expect(hooks.received.map((r) => JSON.parse(r.body).dispatchId).sort()).toEqual(['a', 'b']);
    } finally {
      await role.close();
    }
  });
});
