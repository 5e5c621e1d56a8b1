import { startPoller } from '../poller/index.js';
import type { Command } from './command.js';
import { roleKit, runUntilSignal, warnIfClearTextKey } from './roles.js';
import { configOf } from './settings.js';

/** `agent-dispatch poller`: the poller role only. */
export const pollerCommand: Command = {
  name: 'poller',
  summary: 'the poller role only: tracks sent follow-ups and publishes their events',
  usage: 'poller [--interval DURATION]',
  details: 'Any number may run: their ticks never overlap. Stops gracefully on SIGTERM or SIGINT.',
  options: {
    interval: {
      type: 'string',
      placeholder: 'DURATION',
      setting: 'POLL_INTERVAL',
      description: 'period of the scheduled tick',
    },
  },
  requires: ['REDIS_URL', 'AGENT_API_KEY'],
  async run(ctx) {
    const kit = roleKit(configOf(this, ctx));
    warnIfClearTextKey(kit);
    return runUntilSignal(ctx, kit, [startPoller(kit)]);
  },
};
