import type { Queue } from 'bullmq';
import type { AgentApiClient } from '../agent-api/index.js';
import type { Config } from '../config/index.js';
import type { DispatchStore } from '../dispatch/store.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { ConcurrencyController } from './concurrency.js';

/** What the processor needs, built once per worker process. */
export interface SendContext {
  readonly config: Config;
  readonly store: DispatchStore;
  readonly api: AgentApiClient;
  readonly queue: Queue;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly concurrency: ConcurrencyController;
  readonly workerId: string;
  /** Reads `AGENT_API_KEY_FILE` again; whether the key changed (see `RoleResources`). */
  readonly refreshKey: () => boolean;
}
