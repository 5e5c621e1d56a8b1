/**
 * A producer process for the kill test of idempotency-shards: sends `KEYS` keys one after the
 * other for `PROJECT` (each its own agent job), and prints each key once accepted, so that the
 * test can SIGKILL it in the middle of a send, between a claim and its MULTI or after.
 */
import { createProducer } from '../../../src/producer/index.js';

const env = (name: string) => process.env[name] ?? '';
const producer = createProducer({
  redisUrl: env('REDIS_URL'),
  prefix: env('DISPATCH_PREFIX'),
  eventsStream: env('EVENTS_STREAM'),
  shards: Number(env('DISPATCH_SHARDS')),
  durability: { mode: 'none' },
});
const projectId = env('PROJECT');
for (let i = 0; i < Number(env('KEYS')); i++) {
  const key = `killed-${i}`;
  await producer.send({ projectId, jobId: key, prompt: `for ${projectId}`, key });
  process.stdout.write(`${key}\n`);
}
await producer.close();
