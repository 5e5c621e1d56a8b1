import type { Config } from '../../src/config/index.js';
import { WEBHOOK_GROUP } from '../../src/redis/keys.js';
import type { Role } from '../../src/runtime/role.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import { startWebhooks } from '../../src/webhooks/index.js';
import { addCompletedEvent } from './events.js';
import { eventually, type Namespace } from './namespace.js';

/** A webhook deliverer running in the test process, with its own metrics. */
export interface TestDeliverer {
  readonly role: Role;
  readonly metrics: Metrics;
}

/**
 * Starts a deliverer on `config` (its events claimed from a dead one after `claimIdleMs`) and waits
 * until its consumer group is on the namespace's stream, so no event published after it is missed.
 */
export async function startDeliverer(
  ns: Pick<Namespace, 'redis' | 'eventsStream'>,
  config: Config,
  claimIdleMs = 30_000,
): Promise<TestDeliverer> {
  const metrics = createMetrics();
  const role = startWebhooks({ config, logger: createLogger('silent'), metrics, claimIdleMs });
  await eventually(
    async () => {
      const groups = (await ns.redis
        .xinfo('GROUPS', ns.eventsStream)
        .catch(() => [])) as unknown[][];
      return groups.some((g) => g.includes(WEBHOOK_GROUP)) ? true : undefined;
    },
    { what: 'the webhook consumer group' },
  );
  return { role, metrics };
}

/** Publishes completion events `followup.completed` of dispatches `ids` on the namespace's stream. */
export async function publishEvents(
  ns: Pick<Namespace, 'redis' | 'eventsStream'>,
  ids: readonly string[],
  projectId = 'p1',
): Promise<void> {
  for (const dispatchId of ids) {
    const event = JSON.stringify({ dispatchId, projectId, jobId: 'j1', meta: null, reason: null });
    await addCompletedEvent(ns.redis, ns.eventsStream, {
      dispatchId,
      projectId,
      jobId: 'j1',
      event,
    });
  }
}

/** The value of a metric sample of `metrics` (0 when absent). */
export async function metricValue(
  metrics: Metrics,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = metrics.registry.getSingleMetric(name);
  const data = await metric?.get();
  const sample = data?.values.find((v) =>
    Object.entries(labels).every(([k, value]) => v.labels[k] === value),
  );
  return sample?.value ?? 0;
}
