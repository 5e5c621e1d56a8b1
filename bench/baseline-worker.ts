/**
 * The baseline: the least a BullMQ service must do to deliver a follow-up. One Worker takes each
 * job and POSTs its prompt with undici to the same simulator, the same way our client does (one
 * keep-alive Pool of 64 sockets, the same headers and body), consumes the answer and does nothing
 * else: no record, no lane, no budget, no tracking, no event. Run as a child process by the bench
 * with the same environment variables as our worker, plus BASELINE_QUEUE.
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { DISPATCH_JOB_RETENTION } from '../src/store/jobs.js';
import type { BaselineJob } from './workload.js';

const setting = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const api = new URL(setting('AGENT_API_URL'));
const headers = {
  authorization: `Bearer ${setting('AGENT_API_KEY')}`,
  accept: 'application/json',
  'content-type': 'application/json',
};
const pool = new Pool(api.origin, { connections: 64, pipelining: 1 });

const worker = new Worker<BaselineJob>(
  setting('BASELINE_QUEUE'),
  async (job) => {
    const { projectId, jobId, prompt } = job.data;
    const path = `/v2/agent/${encodeURIComponent(projectId)}/job/${encodeURIComponent(jobId)}/message`;
    const response = await pool.request({
      method: 'POST',
      path,
      headers,
      body: JSON.stringify({ prompt }),
    });
    await response.body.text();
    if (response.statusCode !== 200) throw new Error(`send answered ${response.statusCode}`);
  },
  {
    connection: new Redis(setting('REDIS_URL'), { maxRetriesPerRequest: null }),
    prefix: setting('DISPATCH_PREFIX'),
    concurrency: Number(setting('WORKER_CONCURRENCY')),
    // The same retention as ours, set where ours is (on the Worker, not in each job).
    ...DISPATCH_JOB_RETENTION,
  },
);
worker.on('error', (err) => process.stderr.write(`baseline worker: ${String(err)}\n`));

process.once('SIGTERM', () => {
  void (async () => {
    await worker.close();
    await pool.close();
    process.exit(0);
  })();
});
