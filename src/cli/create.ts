import type { CreateInput } from '../dispatch/creation.js';
import { EXIT, UsageError, type Command } from './command.js';
import { configOf, producerFor } from './compose.js';

/** `agent-dispatch create`: one agent job created through the pipeline (docs/creations.md). */
export const createCommand: Command = {
  name: 'create',
  summary: 'creates an agent job through the pipeline (budgeted, sent once, tracked)',
  usage: 'create --project P --prompt TEXT [--key K] [--meta JSON] [--ttl D | --expires-at T]',
  details: [
    'Prints {"dispatchId": "...", "deduplicated": false}. The creation counts in its project\'s',
    'window (BUDGET_SCOPE), is never sent twice, and ends with one event, job.completed (its first',
    'run ended), job.failed, job.archived, job.timed_out, job.undeliverable, job.cancelled or',
    'job.expired, carrying the new jobId. Follow-ups enqueued with "after": DISPATCH_ID (or the',
    "creation's key) wait for that run to end, then go to the new job.",
  ].join('\n'),
  options: {
    project: { type: 'string', placeholder: 'P', description: 'project id' },
    prompt: { type: 'string', placeholder: 'TEXT', description: "the new job's prompt" },
    key: {
      type: 'string',
      placeholder: 'K',
      description: 'idempotency key: the same key creates once; follow-ups may name it in "after"',
    },
    meta: {
      type: 'string',
      placeholder: 'JSON',
      description: 'small JSON object echoed in the completion event',
    },
    ttl: {
      type: 'string',
      placeholder: 'D',
      description: 'deadline from now (30m, 2h): not sent by then, it ends job.expired',
    },
    'expires-at': {
      type: 'string',
      placeholder: 'T',
      description: 'deadline as an ISO 8601 date-time; not with --ttl',
    },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const values = ctx.values as Record<string, string | undefined>;
    const { project, prompt, key, meta, ttl } = values;
    if (project === undefined || prompt === undefined)
      throw new UsageError('create needs --project and --prompt');
    const input: CreateInput = { projectId: project, prompt };
    if (key !== undefined) input.key = key;
    if (meta !== undefined) input.meta = parseMeta(meta);
    if (ttl !== undefined) input.ttl = ttl;
    if (values['expires-at'] !== undefined) input.expiresAt = values['expires-at'];
    const config = await configOf(this, ctx);
    const producer = producerFor(config);
    try {
      ctx.stdout.write(`${JSON.stringify(await producer.create(input))}\n`);
      return EXIT.ok;
    } finally {
      await producer.close();
    }
  },
};

/** `--meta`'s JSON object (enqueue's too). */
export function parseMeta(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new UsageError('--meta: must be a JSON object, such as {"ticket": 42}');
  }
}
