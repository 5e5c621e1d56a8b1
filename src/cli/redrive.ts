import { adminFor, NotRedrivableError } from '../producer/index.js';
import { EXIT, UsageError, type Command } from './command.js';
import { configOf } from './compose.js';

/**
 * `agent-dispatch redrive`: sends dead letters (follow-ups that ended undeliverable or timed out)
 * again, each as a new follow-up, the same code as the library's `admin.redrive` and
 * `POST /v1/followups/{id}/redrive`. One JSON line per follow-up.
 */
export const redriveCommand: Command = {
  name: 'redrive',
  summary: 'sends follow-ups that ended undeliverable or timed out again, as new follow-ups',
  usage: 'redrive DISPATCH_ID... | redrive [--project P] [--reason R] [--limit N] [--dry-run]',
  details: [
    'Each dead letter (a follow-up that ended followup.undeliverable or followup.timed_out, whose',
    'prompt is still kept: DEAD_LETTER_RETENTION) becomes a NEW follow-up of the same project,',
    'agent job, prompt and meta, with its own dispatch id and event, and the idempotency key',
    'redrive:<old dispatch id>; the old one keeps its one event. Redriving the same one again',
    'answers the same new follow-up ("created": false). Several go in one batch, in the order',
    'they were first enqueued. Without ids: the dead letters that match --project and --reason',
    "(the event's reason, such as not_found or http_400; timed_out for the timed-out ones),",
    'newest first, at most --limit (100). Prints one JSON line each:',
    '{"dispatchId", "redrivenTo", "created"}, or {"dispatchId", "error", "why"} for one refused',
    '(not ended, ended otherwise, prompt no longer kept, unknown): then the exit code is 1.',
    'A timed-out follow-up was sent: its redrive sends the prompt to the agent again.',
    'Example: agent-dispatch redrive --project docs-site --reason not_found --dry-run',
  ].join('\n'),
  options: {
    project: { type: 'string', description: 'the dead letters of this project', placeholder: 'P' },
    reason: { type: 'string', description: 'the dead letters of this reason', placeholder: 'R' },
    limit: { type: 'string', description: 'at most N dead letters (100)', placeholder: 'N' },
    'dry-run': { type: 'boolean', description: 'prints the dead letters, redrives nothing' },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const ids = ctx.positionals;
    const project = ctx.values['project'] as string | undefined;
    const reason = ctx.values['reason'] as string | undefined;
    const limitText = ctx.values['limit'] as string | undefined;
    const dryRun = ctx.values['dry-run'] === true;
    const limit = limitText === undefined ? 100 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
      throw new UsageError('--limit takes a whole number from 1 to 10000');
    if (ids.length > 0 && (project ?? reason ?? limitText) !== undefined)
      throw new UsageError('redrive takes either DISPATCH_IDs or --project/--reason/--limit');
    if (ids.length === 0 && project === undefined && reason === undefined)
      throw new UsageError(
        'redrive takes DISPATCH_IDs, or --project and/or --reason to choose dead letters',
      );
    const admin = adminFor(await configOf(this, ctx));
    try {
      const dead =
        ids.length > 0 ? [] : await admin.deadLetters({ projectId: project, reason, limit });
      const chosen = ids.length > 0 ? ids : dead.map((d) => d.dispatchId);
      if (dryRun) {
        for (const id of chosen)
          ctx.stdout.write(
            `${JSON.stringify(dead.find((d) => d.dispatchId === id) ?? { dispatchId: id })}\n`,
          );
        return EXIT.ok;
      }
      let refused = 0;
      for (let i = 0; i < chosen.length; i += 500) {
        for (const answer of await admin.redriveMany(chosen.slice(i, i + 500))) {
          if (answer instanceof NotRedrivableError) {
            refused++;
            const { dispatchId, why, message } = answer;
            ctx.stdout.write(`${JSON.stringify({ dispatchId, error: message, why })}\n`);
          } else ctx.stdout.write(`${JSON.stringify(answer)}\n`);
        }
      }
      return refused > 0 ? EXIT.failed : EXIT.ok;
    } finally {
      await admin.close();
    }
  },
};
