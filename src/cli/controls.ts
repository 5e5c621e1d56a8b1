import { adminFor, type Admin } from '../producer/index.js';
import { EXIT, oneDispatchId, UsageError, type Command, type CommandContext } from './command.js';
import { configOf } from './compose.js';

/**
 * `agent-dispatch cancel` and `agent-dispatch project ...`: the operator controls, the same code
 * as the library's `createAdmin` and the HTTP routes. Each prints its answer as one JSON object;
 * a refusal (a follow-up past `queued`, an unknown id) exits 1, bad input exits 2 naming the field.
 */

/** Runs `call` with the controls, prints its answer, closes. Errors go to the CLI's report. */
async function withAdmin(
  command: Command,
  ctx: CommandContext,
  call: (admin: Admin) => Promise<object>,
): Promise<number> {
  const admin = adminFor(await configOf(command, ctx));
  try {
    ctx.stdout.write(`${JSON.stringify(await call(admin))}\n`);
    return EXIT.ok;
  } finally {
    await admin.close();
  }
}

/** `agent-dispatch cancel DISPATCH_ID`. */
export const cancelCommand: Command = {
  name: 'cancel',
  summary: 'cancels a follow-up or creation not sent yet: followup.cancelled or job.cancelled',
  usage: 'cancel DISPATCH_ID',
  details: [
    'Ends a queued follow-up with one followup.cancelled event (a creation: job.cancelled), and',
    'hands its lane on to the next follow-up.',
    'Prints {"dispatchId": ..., "state": "done", "type": "followup.cancelled"} (or job.cancelled).',
    'A follow-up being sent, sent or finished is refused with its state, and nothing changes',
    '(exit 1): its prompt may already be with the agent. An unknown id exits 1 too.',
    'Example: agent-dispatch cancel k-3f2a...',
  ].join('\n'),
  options: {},
  requires: ['REDIS_URL'],
  async run(ctx) {
    const dispatchId = oneDispatchId(this.name, ctx);
    return withAdmin(this, ctx, (admin) => admin.cancel(dispatchId));
  },
};

const PROJECT_USAGE =
  'project pause P | project resume P | project limit P N/DURATION [--force] | project limit P --clear | project show P | project unpark P';

/** `agent-dispatch project pause|resume|limit|show P`. */
export const projectCommand: Command = {
  name: 'project',
  summary: 'pauses, resumes, limits, shows or unparks one project, fleet-wide',
  usage: PROJECT_USAGE,
  details: [
    'pause P      no worker sends to P from its next send on; nothing is spent (no attempt, no',
    '             budget); its follow-ups wait, its sent ones are still read until they end',
    'resume P     P sends again; its waiting follow-ups are woken at once, in order',
    'limit P N/D  P gets its own send limit (like SEND_RATE_LIMIT, e.g. 50/1h) from its next',
    '             send on; no window of it holds more, the sends before the change included',
    '             a count of at least 1 and a window of at most 24h; one looser than',
    '             SEND_RATE_LIMIT (more sends in a window of its length) needs --force',
    'limit P --clear  back to SEND_RATE_LIMIT',
    'show P       paused or not, its limit, sends in the current window, when its next slot',
    '             opens, its 429 park, and its queued / sending / tracked follow-ups',
    "unpark P     clears P's 429 park: its follow-ups waiting it out are woken and send within",
    '             its budget (another 429 parks it again)',
    'Each prints one JSON object. An unknown project is fine (a control may come first).',
    'They use the shard count the fleet recorded in Redis; a DISPATCH_SHARDS that differs from it',
    'is refused (exit 2), having changed nothing.',
    'Example: agent-dispatch project limit docs-site 50/1h',
  ].join('\n'),
  options: {
    clear: { type: 'boolean', description: 'with limit: remove the project limit' },
    force: {
      type: 'boolean',
      description: 'with limit: set a limit looser than SEND_RATE_LIMIT all the same',
    },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const [action, projectId, ...rest] = ctx.positionals;
    if (!action || !projectId) throw new UsageError(`usage: agent-dispatch ${PROJECT_USAGE}`);
    const clear = ctx.values['clear'] === true;
    const force = ctx.values['force'] === true;
    const none = (n: number) => {
      if (rest.length > n || ((clear || force) && action !== 'limit'))
        throw new UsageError(`too many arguments; usage: agent-dispatch ${PROJECT_USAGE}`);
    };
    switch (action) {
      case 'pause':
        none(0);
        return withAdmin(this, ctx, (admin) => admin.pauseProject(projectId));
      case 'resume':
        none(0);
        return withAdmin(this, ctx, (admin) => admin.resumeProject(projectId));
      case 'show':
        none(0);
        return withAdmin(this, ctx, (admin) => admin.showProject(projectId));
      case 'unpark':
        none(0);
        return withAdmin(this, ctx, (admin) => admin.unparkProject(projectId));
      case 'limit': {
        const [limit] = rest;
        none(1);
        if (clear === (limit !== undefined) || (clear && force))
          throw new UsageError('limit takes either N/DURATION (such as 50/1h) or --clear');
        return withAdmin(this, ctx, (admin) =>
          limit === undefined
            ? admin.clearProjectLimit(projectId)
            : admin.setProjectLimit(projectId, limit, { force }),
        );
      }
      default:
        throw new UsageError(
          `unknown project action "${action}"; usage: agent-dispatch ${PROJECT_USAGE}`,
        );
    }
  },
};
