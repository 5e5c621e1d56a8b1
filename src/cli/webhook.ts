import { InvalidWebhookError, webhookAdminFor, type WebhookAdmin } from '../webhooks/index.js';
import { EXIT, UsageError, type Command, type CommandContext } from './command.js';
import { configOf } from './compose.js';

/**
 * `agent-dispatch webhook add|list|remove|dead|redrive`: the webhook subscriptions and their dead
 * letters, the same code as `/v1/webhooks`. Each prints JSON; bad input exits 2 naming the field,
 * an unknown id exits 1.
 */

const USAGE =
  'webhook add URL [--project P]... [--type T]... | webhook list | webhook remove ID | webhook dead [--limit N] | webhook redrive [--subscription ID]';

/** Runs `call` with the controls, prints its answer as one JSON object, closes. */
async function withWebhooks(
  command: Command,
  ctx: CommandContext,
  call: (admin: WebhookAdmin) => Promise<object | undefined>,
): Promise<number> {
  const admin = webhookAdminFor(await configOf(command, ctx));
  try {
    const answer = await call(admin);
    if (answer === undefined) return EXIT.failed;
    ctx.stdout.write(`${JSON.stringify(answer)}\n`);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof InvalidWebhookError) throw new UsageError(err.message);
    throw err;
  } finally {
    await admin.close();
  }
}

const list = (value: unknown): string[] | undefined =>
  Array.isArray(value) ? value.map(String) : undefined;

/** `agent-dispatch webhook ...`. */
export const webhookCommand: Command = {
  name: 'webhook',
  summary: 'adds, lists and removes webhook subscriptions; lists and redrives dead deliveries',
  usage: USAGE,
  details: [
    'add URL       a subscription to completion events (every one, or those of --project and',
    '              --type, each repeatable; --type followup.* takes a family). Prints its id and',
    '              its secret (whsec_...), shown this once: the receiver verifies with it',
    'list          every subscription, the static one of WEBHOOK_URL first; never a secret',
    'remove ID     no more deliveries to it, from the next one on',
    'dead          deliveries retried for WEBHOOK_MAX_AGE without a 2xx (one JSON line each)',
    'redrive       queues every dead delivery again (or those of --subscription), each with a new',
    '              WEBHOOK_MAX_AGE and the same webhook-id',
    'Deliveries are at least once, in no promised order: a receiver de-duplicates on webhook-id.',
    'Example: agent-dispatch webhook add https://hooks.example.com/agent --type followup.completed',
  ].join('\n'),
  options: {
    project: {
      type: 'string',
      multiple: true,
      placeholder: 'P',
      description: 'add: only events of P',
    },
    type: {
      type: 'string',
      multiple: true,
      placeholder: 'T',
      description: 'add: only events of type T',
    },
    limit: {
      type: 'string',
      placeholder: 'N',
      description: 'dead: at most N per shard (default 1000)',
    },
    subscription: {
      type: 'string',
      placeholder: 'ID',
      description: 'redrive: only this subscription',
    },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const [action, ...rest] = ctx.positionals;
    const args = (n: number) => {
      if (rest.length !== n) throw new UsageError(`usage: agent-dispatch ${USAGE}`);
      return rest;
    };
    switch (action) {
      case 'add': {
        const [url] = args(1);
        const input = {
          url,
          projects: list(ctx.values['project']),
          types: list(ctx.values['type']),
        };
        return withWebhooks(this, ctx, (admin) => admin.add(input));
      }
      case 'list':
        args(0);
        return withWebhooks(this, ctx, async (admin) => ({ webhooks: await admin.list() }));
      case 'remove': {
        const [id = ''] = args(1);
        return withWebhooks(this, ctx, async (admin) => {
          if (await admin.remove(id)) return { id, removed: true };
          ctx.stderr.write(`agent-dispatch: no webhook subscription ${id}\n`);
          return undefined;
        });
      }
      case 'dead': {
        args(0);
        const limit = limitOf(ctx.values['limit']);
        return withWebhooks(this, ctx, async (admin) => ({ dead: await admin.dead(limit) }));
      }
      case 'redrive': {
        args(0);
        const only = ctx.values['subscription'];
        return withWebhooks(this, ctx, (admin) =>
          admin.redrive(typeof only === 'string' ? only : undefined),
        );
      }
      default:
        throw new UsageError(`usage: agent-dispatch ${USAGE}`);
    }
  },
};

function limitOf(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError('--limit: expected a whole number from 1');
  return n;
}
