import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { addCompletedEvent } from './support/events.js';
import { useNamespace } from './support/namespace.js';

const EXAMPLE = fileURLToPath(new URL('../examples/consume-events.ts', import.meta.url));

describe('examples/consume-events.ts', () => {
  const ns = useNamespace('example');

  it('reads events with a consumer group and acknowledges each one', async () => {
    for (const n of [1, 2, 3]) {
      const event = JSON.stringify({ meta: { n }, reason: null });
      await addCompletedEvent(ns().redis, ns().eventsStream, {
        dispatchId: `d${n}`,
        projectId: 'p',
        jobId: 'j',
        event,
      });
    }
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', EXAMPLE, '--group', 'g', '--count', '3'],
      {
        env: {
          PATH: process.env['PATH'] ?? '',
          REDIS_URL: ns().redisUrl,
          EVENTS_STREAM: ns().eventsStream,
        },
      },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    expect(
      out
        .trim()
        .split('\n')
        .map((line) => line.split(' ')[2]),
    ).toEqual(['d1', 'd2', 'd3']);
    expect(out).toContain('meta={"n":2}');
    const [pending] = (await ns().redis.xpending(ns().eventsStream, 'g')) as [number];
    expect(pending).toBe(0);
  });
});
