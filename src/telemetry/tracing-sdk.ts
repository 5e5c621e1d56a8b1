import type { NodeSDK, resources as Resources } from '@opentelemetry/sdk-node';
import { within } from '../time/deadline.js';

/**
 * The OpenTelemetry Node SDK of a CLI process: started only when `OTEL_TRACES_EXPORTER` names an
 * exporter (the config says which), and then configured by the standard variables alone
 * (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_SERVICE_NAME`,
 * `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`...), which the SDK reads itself. Without it the SDK is
 * not even loaded: no exporter, no timer, and every span of `tracing.ts` is a no-op.
 *
 * Traces only: the metrics are Prometheus's (`/metrics`) and the logs pino's, so the SDK's metric
 * and log exporters (on by default in `NodeSDK`) are turned off.
 */

/** `service.name` when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one. */
const DEFAULT_SERVICE_NAME = 'agent-dispatch';

/** Resource attributes of the process detector left out: they may quote a prompt. */
const COMMAND_LINE = ['process.command_args', 'process.command_line'];

/** How long the exit waits for the last spans to be exported. @defaultValue 5 s */
const FLUSH_TIMEOUT_MS = 5_000;

let sdk: NodeSDK | undefined;
let stopping: Promise<void> | undefined;

/**
 * Starts the SDK once per process when `exporters` is not empty; `command` becomes the resource
 * attribute `agent_dispatch.command` (worker, poller...). Resolves once spans are recorded.
 */
export async function startTracing(
  exporters: readonly string[],
  command: string,
): Promise<boolean> {
  if (exporters.length === 0 || sdk) return sdk !== undefined;
  const { NodeSDK, resources } = await import('@opentelemetry/sdk-node');
  // The detectors' attributes (env: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES; process:
  // process.pid...; host) are merged over these, so the standard variables win.
  const resource = resources.defaultResource().merge(
    resources.resourceFromAttributes({
      'service.name': DEFAULT_SERVICE_NAME,
      'agent_dispatch.command': command,
    }),
  );
  // The process detector's attributes but its command line: `enqueue --prompt TEXT` would put a
  // prompt into every span this process exports.
  const processDetector: Resources.ResourceDetector = {
    detect(config) {
      const { attributes = {} } = resources.processDetector.detect(config);
      const kept = Object.entries(attributes).filter(([name]) => !COMMAND_LINE.includes(name));
      return { attributes: Object.fromEntries(kept) };
    },
  };
  sdk = new NodeSDK({
    resource,
    resourceDetectors: [resources.envDetector, processDetector, resources.hostDetector],
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
  });
  sdk.start();
  return true;
}

/**
 * Exports what is left and stops the SDK, within {@link FLUSH_TIMEOUT_MS} (an unreachable
 * collector must not hold the exit). Idempotent; does nothing when tracing never started.
 */
export function stopTracing(): Promise<void> {
  const running = sdk;
  if (!running) return Promise.resolve();
  stopping ??= within(
    running.shutdown().catch(() => {}),
    FLUSH_TIMEOUT_MS,
    () => {},
  );
  return stopping;
}
