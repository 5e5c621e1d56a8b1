import type { ChainableCommander, Redis } from 'ioredis';
import { discardedTransaction } from './errors.js';

/**
 * The jobs of a committed transaction whose adds failed NOSCRIPT: BullMQ's job add, a large
 * script, is sent by SHA once a connection sent its source, and a server that forgot it (SCRIPT
 * FLUSH, or a restart behind a kept connection) fails the adds inside the committed MULTI while
 * its REGISTER landed: records without their jobs. A second MULTI loads the add first and adds
 * those jobs again (adding an existing job id is a no-op in BullMQ). A transaction whose adds
 * all ran (`enqueue.ts` checks) needs nothing of this file.
 */

/** One reply of a MULTI. */
type Reply = [Error | null, unknown];

/** BullMQ's scripts the transaction runs by SHA (its job add, without delay or priority). */
const BULLMQ_SCRIPTS = ['addStandardJob'];

/**
 * Loads BullMQ's add and queues the adds of the follow-ups at `missing` (positions in the
 * transaction) again on a second MULTI (`add`), in order. Resolves to `replies` with the replies
 * of those adds (at `replyOf` each) replaced by the second MULTI's answers.
 */
export async function addMissingJobs(
  client: Redis,
  replies: readonly Reply[],
  missing: readonly number[],
  replyOf: (i: number) => number,
  add: (multi: ChainableCommander, i: number) => Promise<string>,
): Promise<Reply[]> {
  const multi = client.multi();
  const sources = bullmqSources(client);
  for (const source of sources) multi.script('LOAD', source);
  const reloads = sources.length;
  await Promise.all(missing.map((i) => add(multi, i)));
  const again = await multi.exec();
  if (!again) throw discardedTransaction();
  const merged = [...replies];
  for (const [n, i] of missing.entries()) {
    merged[replyOf(i)] = again[reloads + n] ?? [new Error('no reply'), null];
  }
  return merged;
}

/** The sources of {@link BULLMQ_SCRIPTS} as BullMQ defined them on `client` (`name:version`). */
function bullmqSources(client: Redis): string[] {
  const defined = client.scriptsSet as Record<string, { lua: string } | undefined>;
  return Object.entries(defined).flatMap(([name, script]) =>
    script && BULLMQ_SCRIPTS.includes(name.split(':')[0] ?? '') ? [script.lua] : [],
  );
}
