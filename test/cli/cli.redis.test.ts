import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/redis/keys.js';
import { logLines, runCli, runCliToEnd } from '../support/cli.js';
import { completedStatus, waitForEvents } from '../support/events.js';
import { eventually, useNamespace, withNamespace, type Namespace } from '../support/namespace.js';
import { startService } from '../support/service.js';
import { useSimulator } from '../support/simulator.js';

describe('the agent-dispatch command line', () => {
  const simulator = useSimulator({ workTimeMs: 100 });
  const ns = useNamespace('cli', { scope: 'all' });
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-cli-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /**
   * Runs `enqueue --file` over `lines` in namespace `local`: its exit code, stderr, the JSON lines
   * it printed, and how many BullMQ jobs wait afterwards.
   */
  async function enqueueFile(local: Namespace, name: string, lines: readonly string[]) {
    const file = join(dir, name);
    writeFileSync(file, lines.join('\n'));
    const result = await runCliToEnd(['enqueue', '--file', file], local.env());
    const queue = new Queue(QUEUE_NAMES.dispatch, {
      connection: local.redis.duplicate(),
      prefix: local.prefix,
    });
    try {
      const printed = result.stdout
        .trim()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { line: number; dispatchId: string; deduplicated: boolean });
      return { ...result, printed, waiting: (await queue.getJobCounts('wait'))['wait'] };
    } finally {
      await queue.close();
    }
  }

  it('answers --help for itself and for every command', async () => {
    const top = await runCliToEnd(['--help'], {});
    expect(top.code).toBe(0);
    const commands = ['start', 'worker', 'poller', 'serve', 'enqueue', 'status', 'simulate'];
    for (const name of commands) expect(top.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    const helps = await Promise.all(commands.map((name) => runCliToEnd([name, '--help'], {})));
    for (const [i, help] of helps.entries()) {
      expect(help.code, commands[i]).toBe(0);
      expect(help.stdout).toContain(`Usage: agent-dispatch ${commands[i]}`);
    }
  }, 60_000);

  it('exits 2 with one line naming a bad setting, and never prints the key', async () => {
    const result = await runCliToEnd(['worker'], {
      SEND_RATE_LIMIT: 'abc',
      REDIS_URL: ns().redisUrl,
      AGENT_API_KEY: 'sk-very-secret-value',
    });
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      'agent-dispatch: SEND_RATE_LIMIT: expected N/DURATION such as 100/1h, got "abc"',
    ]);
    expect(result.stdout + result.stderr).not.toContain('sk-very-secret-value');
  });

  it('warns once, at start, when a role would send the key in clear text to another host', async () => {
    const linesOf = async (command: string, url: string) => {
      const proc = runCli([command], ns().env({ AGENT_API_URL: url, LOG_LEVEL: 'info' }));
      try {
        await eventually(() => (proc.output.stdout.includes('role:started') ? true : undefined), {
          timeoutMs: 45_000,
          what: `${command} started`,
        });
        expect(await proc.stop('SIGTERM'), `${command} ${url}`).toBe(0);
      } finally {
        await proc.stop('SIGKILL');
      }
      return logLines(proc.output.stdout).filter((l) => l['msg'] === 'config:clear-text-key');
    };
    for (const command of ['worker', 'poller']) {
      const warned = await linesOf(command, 'http://agent-api.example.test/base');
      expect(warned, command).toHaveLength(1);
      expect(warned[0]).toMatchObject({ level: 40, host: 'agent-api.example.test' });
      expect(JSON.stringify(warned)).not.toContain('test-key');
    }
    for (const url of [
      'http://127.0.0.1:9',
      'http://localhost:9',
      'http://[::1]:9',
      'https://a.example',
    ]) {
      expect(await linesOf('worker', url), url).toEqual([]);
    }
  }, 90_000);

  it('exits 2 on bad usage', async () => {
    const unknownFlag = await runCliToEnd(['enqueue', '--bogus'], ns().env());
    const missing = await runCliToEnd(['enqueue', '--project', 'p'], ns().env());
    const badMeta = await runCliToEnd(
      ['enqueue', '--project', 'p', '--job', 'j', '--prompt', 'x', '--meta', '{nope'],
      ns().env(),
    );
    expect([unknownFlag.code, missing.code, badMeta.code]).toEqual([2, 2, 2]);
    expect(badMeta.stderr).toContain('--meta');
  });

  it('enqueues one follow-up from flags and shows its status', async () => {
    const sent = await runCliToEnd(
      ['enqueue', '--project', 'p', '--job', 'j', '--prompt', 'hi', '--meta', '{"n":1}'],
      ns().env(),
    );
    expect(sent.code).toBe(0);
    const { dispatchId, deduplicated } = JSON.parse(sent.stdout) as {
      dispatchId: string;
      deduplicated: boolean;
    };
    expect(deduplicated).toBe(false);
    const status = await runCliToEnd(['status', dispatchId], ns().env());
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      dispatchId,
      state: 'queued',
      meta: { n: 1 },
    });
    const unknown = await runCliToEnd(['status', 'nope'], ns().env());
    expect(unknown.code).toBe(1);
  });

  it('enqueues the good lines of a file, reports each bad one by number, and exits 1', async () => {
    await withNamespace('cli-file', async (local) => {
      const result = await enqueueFile(local, 'followups.ndjson', [
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'one', key: 'k1' }),
        '{not json',
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: '' }),
        '',
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'two', meta: { a: 1 } }),
        JSON.stringify({ jobId: 'j', prompt: 'three' }),
      ]);
      expect(result.code).toBe(1);
      expect(result.printed.map((l) => l.line)).toEqual([1, 5]);
      expect(result.stderr).toContain('line 2: not valid JSON');
      expect(result.stderr).toContain('line 3: prompt: must not be empty');
      expect(result.stderr).toContain('line 6: projectId:');
      expect(result.waiting).toBe(2);
    });
  });

  it('reports a deeply nested meta and a conflicting key as line errors, enqueues the rest, exits 1', async () => {
    await withNamespace('cli-bad-input', async (local) => {
      const deepArrays = `${'['.repeat(1500)}${']'.repeat(1500)}`;
      const deepObjects = `${'{"a":'.repeat(1500)}1${'}'.repeat(1500)}`;
      const proto = '{"ticket":{"__proto__":{"x":1},"id":7},"__proto__":1}';
      const result = await enqueueFile(local, 'bad-input.ndjson', [
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'one', key: 'k1' }),
        `{"projectId":"p","jobId":"j","prompt":"deep","meta":{"x":${deepArrays}}}`,
        `{"projectId":"p","jobId":"j","prompt":"deeper","meta":{"x":${deepObjects}}}`,
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'changed', key: 'k1' }),
        JSON.stringify({ projectId: 'p', jobId: 'j', prompt: 'one', key: 'k1' }),
        `{"projectId":"p","jobId":"j","prompt":"proto","meta":${proto}}`,
      ]);
      expect(result.stderr).not.toMatch(/RangeError|stack/i);
      expect(result.code).toBe(1);
      expect(result.printed.map((l) => [l.line, l.deduplicated])).toEqual([
        [1, false],
        [5, true],
        [6, false],
      ]);
      expect(result.stderr).toMatch(/^line 2: meta: .*32 levels/m);
      expect(result.stderr).toMatch(/^line 3: meta: .*32 levels/m);
      expect(result.stderr).toMatch(/^line 4: key: .*different follow-up/m);
      expect(result.waiting).toBe(2);
      const dispatchId = result.printed[2]?.dispatchId;
      expect(await local.redis.hget(`${local.prefix}:d:${dispatchId}`, 'meta')).toBe(proto);
    });
  });

  it('exits 1 naming key when enqueue is given a known key with a different prompt', async () => {
    await withNamespace('cli-conflict', async (local) => {
      const args = ['enqueue', '--project', 'p', '--job', 'j', '--key', 'k-conflict'];
      const first = await runCliToEnd([...args, '--prompt', 'one'], local.env());
      expect(first.code).toBe(0);
      const second = await runCliToEnd([...args, '--prompt', 'two'], local.env());
      expect(second.code).toBe(1);
      expect(second.stdout).toBe('');
      expect(second.stderr).toMatch(/key: .*different follow-up/);
    });
  });
  it('shows the status of a finished follow-up: done, its event type, reason and prLink', async () => {
    await withNamespace('cli-ended', async (local) => {
      const service = startService(local, simulator());
      try {
        simulator().seedJob('p', 'done-job');
        const sent = await runCliToEnd(
          ['enqueue', '--project', 'p', '--job', 'done-job', '--prompt', 'finish me'],
          local.env(),
        );
        const { dispatchId } = JSON.parse(sent.stdout) as { dispatchId: string };
        const [event] = await waitForEvents(local.redis, local.eventsStream, 1);
        expect(event).toMatchObject({ dispatchId, type: 'followup.completed' });

        const status = await runCliToEnd(['status', dispatchId], local.env());
        expect(status.stderr).toBe('');
        expect(status.code).toBe(0);
        expect(JSON.parse(status.stdout)).toMatchObject({
          dispatchId,
          ...completedStatus(event),
        });
        expect(event?.prLink).toMatch(/^https:\/\//);
        const unknown = await runCliToEnd(['status', 'no-such-dispatch'], local.env());
        expect(unknown.code).toBe(1);
        expect(unknown.stderr).toContain('no follow-up with dispatchId');
      } finally {
        await service.close();
      }
    });
  }, 60_000);
});
