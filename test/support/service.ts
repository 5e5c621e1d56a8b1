import type { AgentApiClient } from '../../src/agent-api/index.js';
import { startConsumer } from '../../src/consumer/index.js';
import type { Config, SettingName } from '../../src/config/index.js';
import { startPoller, type PollerOptions } from '../../src/poller/index.js';
import { createProducer, type Producer } from '../../src/producer/index.js';
import { openRoleResources, type RoleResources } from '../../src/runtime/resources.js';
import { startPerShard } from '../../src/runtime/shards.js';
import { createLogger, type Logger } from '../../src/telemetry/logger.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import { afterEach } from 'vitest';
import { useNamespace, type Namespace } from './namespace.js';
import { TEST_API_KEY, useSimulator } from './simulator.js';
import type { Simulator, SimulatorOptions } from '../../src/simulator/index.js';

/** Roles of the service running inside the test process, against a simulator. */
export interface InProcessService {
  readonly config: Config;
  readonly producer: Producer;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Stops every role and the producer; safe to call twice. */
  close(): Promise<void>;
}

/** Settings that make tests quick: short polls, a short grace period, a short shutdown. */
export const FAST_SETTINGS: Partial<Record<SettingName, string>> = {
  POLL_INTERVAL: '100ms',
  POLL_MIN_INTERVAL: '100ms',
  POLL_MAX_INTERVAL: '1s',
  ACTIVE_GRACE: '2s',
  SHUTDOWN_TIMEOUT: '5s',
  SEND_TIMEOUT: '2s',
  CONNECT_TIMEOUT: '1s',
};

/** The config of a role in `ns`, on `simulator`, with {@link FAST_SETTINGS} and `settings`. */
function serviceConfig(
  ns: Namespace,
  simulator: Simulator,
  settings: Partial<Record<SettingName, string>> = {},
): Config {
  return ns.config({
    ...FAST_SETTINGS,
    AGENT_API_URL: simulator.url,
    AGENT_API_KEY: TEST_API_KEY,
    ...settings,
  });
}

/**
 * A poller's resources (store, API client, queue) in `ns`, with no tick running: for tests that
 * run a tick or a read by hand. The caller closes them.
 */
export function pollerResources(
  ns: Namespace,
  simulator: Simulator,
  metrics: Metrics = createMetrics(),
): RoleResources {
  return openRoleResources('poller', {
    config: serviceConfig(ns, simulator),
    logger: createLogger('silent'),
    metrics,
  });
}

/** Starts `roles` (a worker and a poller by default) in this process. */
export function startService(
  ns: Namespace,
  simulator: Simulator,
  settings: Partial<Record<SettingName, string>> = {},
  roles: {
    worker?: boolean;
    poller?: boolean;
    watchdog?: PollerOptions['watchdog'];
    /** The worker's agent-API client, in place of the one its config makes. */
    api?: AgentApiClient;
  } = {},
): InProcessService {
  const config = serviceConfig(ns, simulator, settings);
  const logger = createLogger(config.logLevel);
  const metrics = createMetrics();
  // Each role once per shard (`DISPATCH_SHARDS`), as the CLI starts them; one shard: just it.
  const started = [
    ...(roles.worker === false
      ? []
      : [startPerShard('worker', { config, logger, metrics, api: roles.api }, startConsumer)]),
    ...(roles.poller === false
      ? []
      : [
          startPerShard(
            'poller',
            { config, logger, metrics, watchdog: roles.watchdog },
            startPoller,
          ),
        ]),
  ];
  const producer = createProducer({
    redisUrl: ns.redisUrl,
    prefix: ns.prefix,
    promptMaxBytes: config.promptMaxBytes,
  });
  let closing: Promise<void> | undefined;
  return {
    config,
    producer,
    metrics,
    logger,
    close: () =>
      (closing ??= Promise.all([...started.map((r) => r.close()), producer.close()]).then(
        () => {},
      )),
  };
}

/** What {@link useService} gives a describe block. */
export interface ServiceFixture {
  /** The describe's simulator, reset before each test. */
  readonly simulator: () => Simulator;
  /** The test's namespace. */
  readonly ns: () => Namespace;
  /** Starts {@link startService} in the test's namespace; closed after the test. */
  start(
    settings?: Partial<Record<SettingName, string>>,
    roles?: { worker?: boolean; poller?: boolean; api?: AgentApiClient },
  ): InProcessService;
}

/**
 * One simulator (with `simulatorOptions`) for the describe, a fresh namespace `label` per test,
 * and services started in it, closed after each test before the namespace is cleaned up.
 */
export function useService(
  label: string,
  simulatorOptions: Partial<SimulatorOptions> = {},
): ServiceFixture {
  const simulator = useSimulator(simulatorOptions);
  const ns = useNamespace(label, { simulator });
  const started: InProcessService[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
  });
  return {
    simulator,
    ns,
    start: (settings, roles) => {
      const service = startService(ns(), simulator(), settings, roles);
      started.push(service);
      return service;
    },
  };
}
