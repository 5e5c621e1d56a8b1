import { startConsumer } from '../consumer/index.js';
import type { Command } from './command.js';
import { roleKit, runUntilSignal, warnIfClearTextKey } from './roles.js';
import { configOf } from './settings.js';

/** `agent-dispatch worker`: the consumer role only; run as many as the load needs. */
export const workerCommand: Command = {
  name: 'worker',
  summary: 'the consumer role only: sends follow-ups (scale this one out)',
  usage: 'worker [--concurrency N] [--rate N/DURATION]',
  details: 'Stops gracefully on SIGTERM or SIGINT: in-flight sends finish within SHUTDOWN_TIMEOUT.',
  options: {
    concurrency: {
      type: 'string',
      placeholder: 'N',
      setting: 'WORKER_CONCURRENCY',
      description: 'sends in flight in this process at most',
    },
    rate: {
      type: 'string',
      placeholder: 'N/DURATION',
      setting: 'SEND_RATE_LIMIT',
      description: 'sends per project per window, fleet-wide',
    },
  },
  requires: ['REDIS_URL', 'AGENT_API_KEY'],
  async run(ctx) {
    const kit = roleKit(configOf(this, ctx));
    warnIfClearTextKey(kit);
    return runUntilSignal(ctx, kit, [startConsumer(kit)]);
  },
};
