import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Writable } from 'node:stream';
import { checkDispatch, type DispatchInput, type FollowUpInput } from '../dispatch/creation.js';
import {
  BacklogFullError,
  conflictProblem,
  IdempotencyConflictError,
  InvalidFollowUpError,
  type Producer,
  type SendResult,
} from '../producer/index.js';
import { EXIT, UsageError, type Command } from './command.js';
import { configOf, producerFor } from './compose.js';
import { parseMeta } from './create.js';

/** Lines sent per `sendMany` call: one round trip each. */
const BATCH = 500;
/** Progress goes to stderr at most this often on long files. */
const PROGRESS_EVERY_MS = 2_000;

/** `agent-dispatch enqueue`: one follow-up from flags, or many from an NDJSON file. */
export const enqueueCommand: Command = {
  name: 'enqueue',
  summary: 'puts follow-ups on the queue, from flags or an NDJSON file',
  usage:
    'enqueue --project P --job J --prompt TEXT [--key K] [--meta JSON] [--ttl D | --expires-at T]\n       agent-dispatch enqueue --file F.ndjson',
  details: [
    'Prints one JSON line per follow-up: {"dispatchId": "...", "deduplicated": false} (with "line" for files).',
    'A file has one JSON object per line (projectId, jobId, prompt, optional key, meta, ttl or',
    'expiresAt; "create": true and no jobId creates a job, "after" in place of jobId chains to one);',
    '"-" reads stdin. Past its deadline, not sent yet, a follow-up ends followup.expired.',
    'Each bad line is reported on stderr with its number and reason; good lines are still enqueued,',
    'and the exit code is 1 if any line was bad.',
  ].join('\n'),
  options: {
    project: { type: 'string', placeholder: 'P', description: 'project id' },
    job: { type: 'string', placeholder: 'J', description: 'agent job id' },
    prompt: { type: 'string', placeholder: 'TEXT', description: 'the follow-up prompt' },
    key: {
      type: 'string',
      placeholder: 'K',
      description: 'idempotency key: the same key is enqueued once',
    },
    meta: {
      type: 'string',
      placeholder: 'JSON',
      description: 'small JSON object echoed in the completion event',
    },
    ttl: {
      type: 'string',
      placeholder: 'D',
      description: 'deadline from now (30m, 2h): not sent by then, it ends followup.expired',
    },
    'expires-at': {
      type: 'string',
      placeholder: 'T',
      description: 'deadline as an ISO 8601 date-time (2026-12-01T09:00:00Z); not with --ttl',
    },
    file: {
      type: 'string',
      placeholder: 'F.ndjson',
      description: 'read follow-ups from this NDJSON file',
    },
  },
  requires: ['REDIS_URL'],
  async run(ctx) {
    const values = ctx.values as Record<string, string | undefined>;
    const { file, project, job, prompt, key, meta, ttl } = values;
    const expiresAt = values['expires-at'];
    if (
      file !== undefined &&
      (project ?? job ?? prompt ?? key ?? meta ?? ttl ?? expiresAt) !== undefined
    ) {
      throw new UsageError(
        '--file cannot be combined with --project, --job, --prompt, --key, --meta, --ttl or --expires-at',
      );
    }
    if (
      file === undefined &&
      (project === undefined || job === undefined || prompt === undefined)
    ) {
      throw new UsageError('enqueue needs --project, --job and --prompt, or --file');
    }
    const config = await configOf(this, ctx);
    const producer = producerFor(config);
    try {
      if (file !== undefined)
        return await enqueueFile(producer, file, config.promptMaxBytes, ctx.stdout, ctx.stderr);
      const input: FollowUpInput = {
        projectId: project ?? '',
        jobId: job ?? '',
        prompt: prompt ?? '',
      };
      if (key !== undefined) input.key = key;
      if (meta !== undefined) input.meta = parseMeta(meta);
      if (ttl !== undefined) input.ttl = ttl;
      if (expiresAt !== undefined) input.expiresAt = expiresAt;
      const result = await producer.send(input);
      ctx.stdout.write(`${JSON.stringify(result)}\n`);
      return EXIT.ok;
    } finally {
      await producer.close();
    }
  },
};

/** Reads an NDJSON file in batches; resolves to the exit code. */
async function enqueueFile(
  producer: Producer,
  path: string,
  promptMaxBytes: number,
  stdout: Writable,
  stderr: Writable,
): Promise<number> {
  const input = path === '-' ? process.stdin : createReadStream(path);
  const opened = new Promise<void>((resolve, reject) => {
    input.once('error', (err: NodeJS.ErrnoException) =>
      reject(new UsageError(`--file: cannot read ${path}: ${err.code ?? err.message}`)),
    );
    input.once('readable', () => resolve());
    input.once('end', () => resolve());
  });
  await opened;
  const counts = { lines: 0, enqueued: 0, deduplicated: 0, bad: 0 };
  let batch: { line: number; value: DispatchInput }[] = [];
  let lastProgress = Date.now();
  const flush = async () => {
    if (batch.length === 0) return;
    const lines = batch.map((b) => b.line);
    const results = await sendBatch(
      producer,
      batch.map((b) => b.value),
    );
    for (const [i, result] of results.entries()) {
      if ('problem' in result) {
        counts.bad++;
        stderr.write(`line ${lines[i]}: ${result.problem}\n`);
        continue;
      }
      stdout.write(`${JSON.stringify({ ...result, line: lines[i] })}\n`);
      counts[result.deduplicated ? 'deduplicated' : 'enqueued']++;
    }
    batch = [];
    if (Date.now() - lastProgress > PROGRESS_EVERY_MS) {
      lastProgress = Date.now();
      stderr.write(
        `enqueue: ${linesOf(counts.lines)} read, ${counts.enqueued} enqueued, ${counts.deduplicated} deduplicated, ${counts.bad} bad\n`,
      );
    }
  };
  for await (const text of createInterface({ input, crlfDelay: Infinity })) {
    const line = ++counts.lines;
    if (text.trim() === '') continue;
    const problem = parseLine(text, promptMaxBytes);
    if (typeof problem === 'string') {
      counts.bad++;
      stderr.write(`line ${line}: ${problem}\n`);
      continue;
    }
    batch.push({ line, value: problem });
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  stderr.write(
    `enqueue: ${linesOf(counts.lines)}, ${counts.enqueued} enqueued, ${counts.deduplicated} deduplicated, ${counts.bad} bad\n`,
  );
  return counts.bad > 0 ? EXIT.failed : EXIT.ok;
}

type LineAnswer = SendResult | { problem: string };

/**
 * Sends one batch; a line whose key conflicts gets its problem instead of a result. The rest of
 * the batch was enqueued in the same transaction, so its results are reported as usual. A batch
 * refused for a full backlog (`PROJECT_BACKLOG_MAX`, nothing of it enqueued) is sent again line by
 * line ({@link sendEach}), so only the lines past the limit are refused.
 */
async function sendBatch(producer: Producer, followUps: DispatchInput[]): Promise<LineAnswer[]> {
  return sendLines(producer, followUps).catch((err: unknown) => {
    // An `after` that names no creation refuses the batch: each line alone says which.
    if (err instanceof BacklogFullError || err instanceof InvalidFollowUpError)
      return sendEach(producer, followUps);
    throw err;
  });
}

/** Sends lines in one batch; a line whose key conflicts gets its problem instead of a result. */
async function sendLines(producer: Producer, followUps: DispatchInput[]): Promise<LineAnswer[]> {
  try {
    return await producer.sendMany(followUps);
  } catch (err) {
    if (!(err instanceof IdempotencyConflictError)) throw err;
    return err.results.map((result, i) => {
      const conflict = err.conflicts.find((c) => c.index === i);
      if (result || !conflict) return result ?? { problem: 'refused' };
      const { field, message } = conflictProblem(conflict);
      return { problem: `${field}: ${message}` };
    });
  }
}

/**
 * Sends each line alone, in order; a line refused for a full backlog gets that problem, and so
 * does every later line of its project in the batch, without a send (each refused send leaves a
 * BullMQ job behind that a worker ends).
 */
async function sendEach(producer: Producer, followUps: DispatchInput[]): Promise<LineAnswer[]> {
  const full = new Map<string, BacklogFullError>();
  const answers: LineAnswer[] = [];
  for (const followUp of followUps) {
    let refused = full.get(followUp.projectId);
    if (!refused) {
      try {
        answers.push(...(await sendLines(producer, [followUp])));
        continue;
      } catch (err) {
        if (err instanceof InvalidFollowUpError) {
          answers.push({ problem: err.problems.map((p) => `${p.field}: ${p.message}`).join('; ') });
          continue;
        }
        if (!(err instanceof BacklogFullError)) throw err;
        full.set(followUp.projectId, (refused = err));
      }
    }
    const { queued, retryAfterMs } = refused;
    const retry = `retry in ${Math.ceil(retryAfterMs / 1000)} s`;
    answers.push({ problem: `projectId: backlog full (${queued} not yet sent); ${retry}` });
  }
  return answers;
}

/** One line as sent (a follow-up, a creation, a chained one), or why it is bad (the field). */
function parseLine(text: string, promptMaxBytes: number): DispatchInput | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'not valid JSON';
  }
  const checked = checkDispatch(value, promptMaxBytes);
  if (checked.ok) return value as DispatchInput;
  // `field: message` per problem: scripts read the field before the first colon.
  return checked.problems.map((p) => `${p.field}: ${p.message}`).join('; ');
}

function linesOf(n: number): string {
  return n === 1 ? '1 line' : `${n} lines`;
}
