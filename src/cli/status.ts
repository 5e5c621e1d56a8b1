import { createProducer } from '../producer/index.js';
import { EXIT, oneDispatchId, type Command } from './command.js';
import { configOf } from './compose.js';

/** `agent-dispatch status DISPATCH_ID`: one follow-up's state as one JSON object. */
export const statusCommand: Command = {
  name: 'status',
  summary: "prints a follow-up's state as one JSON object",
  usage: 'status DISPATCH_ID',
  details:
    'A finished follow-up answers for DISPATCH_RETENTION: state done, with its event type, reason ' +
    'and prLink. Exits 1 when no follow-up has that id (never enqueued, or expired).',
  options: {},
  requires: ['REDIS_URL'],
  async run(ctx) {
    const dispatchId = oneDispatchId(this.name, ctx);
    const config = await configOf(this, ctx);
    const producer = createProducer({ redisUrl: config.redisUrl ?? '', prefix: config.prefix });
    try {
      const state = await producer.status(dispatchId);
      if (!state) {
        ctx.stderr.write(
          `agent-dispatch: no follow-up with dispatchId ${JSON.stringify(dispatchId)}\n`,
        );
        return EXIT.failed;
      }
      ctx.stdout.write(`${JSON.stringify(state)}\n`);
      return EXIT.ok;
    } finally {
      await producer.close();
    }
  },
};
