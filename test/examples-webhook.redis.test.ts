import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createProducer } from '../src/producer/index.js';
import { WEBHOOK_GROUP } from '../src/redis/keys.js';
import { runCli, type CliProcess } from './support/cli.js';
import { eventually, useNamespace } from './support/namespace.js';
import { TEST_WEBHOOK_SECRET } from './support/webhook-receiver.js';

const RECEIVER = fileURLToPath(new URL('../examples/python/webhook_receiver.py', import.meta.url));

/** The receiver as a child process: its output so far, and how to stop it. */
function startReceiver(secret: string) {
  const child = spawn('python3', [RECEIVER, '--port', '0'], {
    env: { PATH: process.env['PATH'] ?? '', WEBHOOK_SECRET: secret },
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return { child, output, stop: () => (child.kill('SIGTERM'), exited) };
}

describe('examples/python/webhook_receiver.py', () => {
  const ns = useNamespace('pyhook');
  const stops: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  });

  it('verifies and prints the events of a real `agent-dispatch start`', async () => {
    const receiver = startReceiver(TEST_WEBHOOK_SECRET);
    stops.push(receiver.stop);
    const url = await eventually(() => /listening on (\S+)/.exec(receiver.output.stderr)?.[1], {
      what: 'the receiver to listen',
    });
    const forged = await fetch(url, {
      method: 'POST',
      headers: {
        'webhook-id': 'msg_x',
        'webhook-timestamp': `${Math.floor(Date.now() / 1000)}`,
        'webhook-signature': 'v1,AAAA',
      },
      body: '{"type":"followup.completed"}',
    });
    expect(forged.status).toBe(401);

    const service: CliProcess = runCli(
      ['start', '--simulator'],
      ns().env({
        WEBHOOK_URL: url,
        WEBHOOK_SECRET: TEST_WEBHOOK_SECRET,
        HTTP_PORT: '0',
        POLL_INTERVAL: '200ms',
        POLL_MIN_INTERVAL: '200ms',
        LOG_FORMAT: 'json',
      }),
    );
    stops.push(() => service.stop());
    await eventually(
      async () => {
        const groups = (await ns()
          .redis.xinfo('GROUPS', ns().eventsStream)
          .catch(() => [])) as unknown[][];
        return groups.some((g) => g.includes(WEBHOOK_GROUP)) ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'the deliverer of start' },
    );
    const producer = createProducer({ redisUrl: ns().redisUrl, prefix: ns().prefix });
    const sent = await producer.sendMany([
      { projectId: 'docs', jobId: 'j1', prompt: 'one' },
      { projectId: 'docs', jobId: 'j2', prompt: 'two' },
    ]);
    await producer.close();
    const lines = await eventually(
      () => {
        const printed = receiver.output.stdout.trim().split('\n').filter(Boolean);
        return printed.length >= 2
          ? printed.map((l) => JSON.parse(l) as Record<string, unknown>)
          : undefined;
      },
      { timeoutMs: 45_000, what: 'two events printed' },
    );
    expect(new Set(lines.map((l) => l['dispatchId']))).toEqual(
      new Set(sent.map((s) => s.dispatchId)),
    );
    expect(lines.every((l) => l['type'] === 'followup.completed' && l['duplicate'] === false)).toBe(
      true,
    );
    expect(lines.every((l) => String(l['webhook_id']).startsWith('msg_'))).toBe(true);
    expect(receiver.output.stderr).toContain('rejected: no valid v1 signature');
    expect(await service.stop()).toBe(0);
    expect(service.output.stdout + service.output.stderr).not.toContain(
      TEST_WEBHOOK_SECRET.slice(6),
    );
  });
});
