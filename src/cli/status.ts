import { EXIT, oneDispatchId, type Command } from './command.js';
import { configOf, producerFor } from './compose.js';

/** `agent-dispatch status DISPATCH_ID`: one follow-up's state as one JSON object. */
export const statusCommand: Command = {
  name: 'status',
  summary: "prints a follow-up's state as one JSON object",
  usage: 'status DISPATCH_ID',
  details:
    'A finished follow-up answers for DISPATCH_RETENTION: state done, with its event type, reason ' +
    'and prLink. Exits 1 when no follow-up has that id (never enqueued, or expired). It uses the ' +
    'shard count the fleet recorded in Redis; a DISPATCH_SHARDS that differs is refused (exit 2).',
  options: {},
  requires: ['REDIS_URL'],
  async run(ctx) {
    const dispatchId = oneDispatchId(this.name, ctx);
    const config = await configOf(this, ctx);
    // The fleet's settings, its shard count above all: with only the prefix, a record in any
    // shard but the first was never found (and DISPATCH_SHARDS=4 was refused as 1).
    const producer = producerFor(config);
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
