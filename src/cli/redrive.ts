import type { Writable } from 'node:stream';
import {
  adminFor,
  InvalidControlError,
  NotRedrivableError,
  REDRIVE_DEFAULT_LIMIT,
  type RedriveFilter,
  type RedriveOutcome,
} from '../producer/index.js';
import { EXIT, UsageError, type Command } from './command.js';
import { configOf } from './compose.js';

/** Progress goes to stderr at most this often on long runs. */
const PROGRESS_EVERY_MS = 2_000;

/**
 * `agent-dispatch redrive`: sends dead letters (follow-ups that ended undeliverable or timed out)
 * again, each as a new follow-up, the same code as the library's `admin.redriveEach` and
 * `POST /v1/redrive`, a page of 500 at a time. One JSON line per follow-up.
 */
export const redriveCommand: Command = {
  name: 'redrive',
  summary: 'sends ended follow-ups again as new ones (redriveOf)',
  usage:
    'redrive [--project P] [--reason R] [--since T] [--limit N] [--dry-run]\n       agent-dispatch redrive DISPATCH_ID... [--dry-run]',
  details: [
    'Each dead letter (a follow-up that ended followup.undeliverable or followup.timed_out, whose',
    'prompt is still kept: DEAD_LETTER_RETENTION) becomes a NEW follow-up of the same project,',
    'agent job, prompt and meta, with its own dispatch id and event, the idempotency key',
    'redrive:<old dispatch id> and redriveOf (the old one gets redrivenTo); the old one keeps its',
    'one event. Redriving the same one again answers the same new follow-up ("created": false).',
    "Without ids: the dead letters that match --project, --reason (the event's reason, such as",
    'not_found or http_400; timed_out for the timed-out ones) and --since (ended at or after T: an',
    'ISO 8601 time, or a duration back from now such as 2h), oldest end first, at most --limit',
    '(100), redriven 500 at a time in the order they ended. Prints one JSON line each:',
    '{"dispatchId", "redrivenTo", "created"}, or {"dispatchId", "error", "why"} for one refused',
    '(not ended, ended otherwise, prompt no longer kept, unknown): then the exit code is 1.',
    '--dry-run prints the dead letters that would be redriven ("dryRun": true) and sends nothing.',
    'Progress and a summary go to stderr.',
    'A timed-out follow-up was sent: its redrive sends the prompt to the agent again.',
    'Those that ended ambiguous or stuck_sending (the agent may have received the prompt) are',
    'left out unless --reason names that reason (or their ids are given): a redrive may send',
    'them twice.',
    'Example: agent-dispatch redrive --project docs-site --reason not_found --since 2h --dry-run',
  ].join('\n'),
  options: {
    project: { type: 'string', description: 'the dead letters of this project', placeholder: 'P' },
    reason: { type: 'string', description: 'the dead letters of this reason', placeholder: 'R' },
    since: {
      type: 'string',
      description: 'the dead letters that ended at or after T (ISO 8601, or 2h back)',
      placeholder: 'T',
    },
    limit: { type: 'string', description: 'at most N dead letters (100)', placeholder: 'N' },
    'dry-run': { type: 'boolean', description: 'prints the dead letters, redrives nothing' },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const ids = ctx.positionals;
    const text = (name: string) => ctx.values[name] as string | undefined;
    const limitText = text('limit');
    const limit = limitText === undefined ? undefined : Number(limitText);
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1))
      throw new UsageError('--limit takes a whole number of at least 1');
    if (ids.length > 0 && (text('project') ?? text('reason') ?? text('since') ?? limitText))
      throw new UsageError(
        'redrive takes either DISPATCH_IDs or --project/--reason/--since/--limit',
      );
    const filter: RedriveFilter = {
      ...(ids.length > 0 ? { dispatchIds: ids } : {}),
      project: text('project'),
      reason: text('reason'),
      since: text('since'),
      limit,
      dryRun: ctx.values['dry-run'] === true,
    };
    const admin = adminFor(await configOf(this, ctx));
    try {
      return await redriveAll(admin.redriveEach(filter), filter, ctx.stdout, ctx.stderr);
    } catch (err) {
      if (err instanceof InvalidControlError)
        throw new UsageError(`--${err.field === 'dryRun' ? 'dry-run' : err.field}: ${err.problem}`);
      throw err;
    } finally {
      await admin.close();
    }
  },
};

/** Prints each page's answers as it comes, progress on stderr; resolves to the exit code. */
async function redriveAll(
  pages: AsyncIterable<RedriveOutcome[]>,
  filter: RedriveFilter,
  stdout: Writable,
  stderr: Writable,
): Promise<number> {
  const counts = { created: 0, already: 0, refused: 0, planned: 0 };
  let lastProgress = Date.now();
  const summary = () =>
    filter.dryRun
      ? `${counts.planned} would be redriven (dry run), ${counts.already} already redriven, ${counts.refused} refused`
      : `${counts.created} redriven, ${counts.already} already redriven, ${counts.refused} refused`;
  for await (const page of pages) {
    for (const answer of page) {
      if (answer instanceof NotRedrivableError) {
        counts.refused++;
        const { dispatchId, why, message } = answer;
        stdout.write(`${JSON.stringify({ dispatchId, error: message, why })}\n`);
        continue;
      }
      if ('dryRun' in answer) counts.planned++;
      else counts[answer.created ? 'created' : 'already']++;
      stdout.write(`${JSON.stringify(answer)}\n`);
    }
    if (Date.now() - lastProgress > PROGRESS_EVERY_MS) {
      lastProgress = Date.now();
      stderr.write(`redrive: ${summary()} so far\n`);
    }
  }
  const total = counts.created + counts.already + counts.refused + counts.planned;
  const limit = filter.dispatchIds ? undefined : (filter.limit ?? REDRIVE_DEFAULT_LIMIT);
  const capped = limit !== undefined && total >= limit ? `; stopped at --limit ${limit}` : '';
  stderr.write(`redrive: ${summary()}${capped}\n`);
  return counts.refused > 0 ? EXIT.failed : EXIT.ok;
}
