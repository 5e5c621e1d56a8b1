import type { Redis } from 'ioredis';
import { keysFor } from '../../../src/redis/keys.js';

/** One poison job: what to write, and the event it must end with (none: `reason` undefined). */
export interface PoisonCase {
  readonly name: string;
  readonly jobId: string;
  readonly data: unknown;
  /** A dispatch record to write first (its `prompt` under the prompt's key), as if by hand. */
  readonly record?: Record<string, string>;
  readonly reason: string | undefined;
}

/** The cases: payloads the consumer cannot read, and records it must not send. */
export function poisonCases(promptMaxBytes: number): PoisonCase[] {
  const payload = (dispatchId: string) => ({ p: 'p', j: dispatchId });
  const record = (prompt: string, state = 'queued') => ({ prompt, state });
  return [
    {
      name: 'payload of another shape {v: 0, foo: 1}',
      jobId: 'poison-v0',
      data: { v: 0, foo: 1 },
      reason: 'invalid_payload',
    },
    {
      name: 'payload that is a string',
      jobId: 'poison-string',
      data: 'hello',
      reason: 'invalid_payload',
    },
    { name: 'payload that is null', jobId: 'poison-null', data: null, reason: 'invalid_payload' },
    {
      name: 'payload with an empty dispatch id',
      jobId: 'poison-empty-id',
      data: { p: 'p', j: 'j', d: '' },
      reason: 'invalid_payload',
    },
    {
      name: 'compact payload with an empty project id',
      jobId: 'poison-empty-project',
      data: { p: '', j: 'j' },
      reason: 'invalid_payload',
    },
    {
      name: 'compact payload whose dispatch record is missing',
      jobId: 'poison-ghost-compact',
      data: { p: 'p', j: 'poison-ghost-compact' },
      reason: 'missing_record',
    },
    {
      name: 'record whose prompt is empty',
      jobId: 'poison-empty-prompt',
      data: payload('poison-empty-prompt'),
      record: record(''),
      reason: 'invalid_payload',
    },
    {
      name: `record whose prompt is over PROMPT_MAX_BYTES (${promptMaxBytes})`,
      jobId: 'poison-big-prompt',
      data: payload('poison-big-prompt'),
      record: record('x'.repeat(promptMaxBytes + 1)),
      reason: 'invalid_payload',
    },
    {
      name: 'job replayed for a dispatch that already ended',
      jobId: 'poison-done',
      data: payload('poison-done'),
      record: { ...record('hi', 'done'), type: 'followup.completed' },
      reason: undefined,
    },
  ];
}

/** Writes the dispatch record of a case (and its lane entry), as the producer's script would. */
export async function writeRecord(redis: Redis, prefix: string, c: PoisonCase): Promise<void> {
  if (!c.record) return;
  const keys = keysFor(prefix);
  const { prompt, ...given } = c.record;
  const fields = {
    projectId: 'p',
    jobId: c.jobId,
    key: '',
    meta: '',
    enqueuedAt: String(Date.now()),
    attempts: '0',
    polls: '0',
    ...given,
  };
  await redis.hset(keys.dispatch(c.jobId), fields);
  if (prompt !== undefined) await redis.set(keys.prompt(c.jobId), prompt);
  if (c.record['state'] === 'queued') await redis.rpush(keys.lane('p', c.jobId), c.jobId);
}
