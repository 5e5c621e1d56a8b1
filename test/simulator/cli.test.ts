import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { simulateCommand } from '../../src/cli/simulate.js';
import { UsageError, type CommandContext } from '../../src/cli/command.js';
import { eventually } from '../support/namespace.js';
import { closeRaw, get, send } from './raw-http.js';

/** `agent-dispatch simulate` through its command object, as the CLI runs it. */

afterAll(() => closeRaw());

interface Running {
  readonly stop: () => void;
  readonly exitCode: Promise<number>;
  readonly firstLine: Promise<{ url: string; apiKey: string }>;
  readonly stderr: () => string;
}

function run(values: CommandContext['values'], env: Record<string, string> = {}): Running {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let errText = '';
  stderr.on('data', (chunk: Buffer) => (errText += chunk.toString('utf8')));
  const controller = new AbortController();
  const firstLine = new Promise<{ url: string; apiKey: string }>((resolve) => {
    let text = '';
    stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const end = text.indexOf('\n');
      if (end >= 0) resolve(JSON.parse(text.slice(0, end)) as { url: string; apiKey: string });
    });
  });
  const exitCode = simulateCommand.run({
    values,
    positionals: [],
    env,
    stdout,
    stderr,
    signal: controller.signal,
  });
  return { stop: () => controller.abort(), exitCode, firstLine, stderr: () => errText };
}

describe('simulate', () => {
  it('prints {url, apiKey}, serves seeded jobs with that key, and stops on abort with 0', async () => {
    const running = run({
      port: '0',
      key: 'demo-key',
      seed: ['acme/job-1', 'acme/job-2'],
      'work-time': '50ms',
    });
    const { url, apiKey } = await running.firstLine;
    expect(apiKey).toBe('demo-key');
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await get(url, 'acme', 'job-2', { key: apiKey })).json).toMatchObject({
      id: 'job-2',
      status: 'completed',
    });
    expect((await send(url, 'acme', 'job-1', 'hi', { key: apiKey })).status).toBe(200);
    expect((await get(url, 'acme', 'job-1', { key: 'other' })).status).toBe(401);
    running.stop();
    expect(await running.exitCode).toBe(0);
    await expect(get(url, 'acme', 'job-1', { key: apiKey })).rejects.toThrow();
  });

  it('never takes AGENT_API_KEY as its key: a random one unless --key; logs requests at debug to stderr', async () => {
    const secret = 'real-agent-api-key-never-print';
    const fromEnv = run({ 'auto-create': true }, { AGENT_API_KEY: secret, LOG_LEVEL: 'debug' });
    const { url, apiKey } = await fromEnv.firstLine;
    expect(apiKey).toMatch(/^sim-[0-9a-f]{32}$/);
    expect((await get(url, 'any', 'job', { key: secret })).status).toBe(401);
    expect((await get(url, 'any', 'job', { key: apiKey })).status).toBe(200);
    const line = await eventually(() =>
      fromEnv
        .stderr()
        .split('\n')
        .find((l) => l.includes('simulator:request') && l.includes('"status":200')),
    );
    expect(JSON.parse(line)).toMatchObject({
      level: 20,
      kind: 'get',
      status: 200,
      msg: 'simulator:request',
    });
    expect(fromEnv.stderr()).not.toContain(secret);
    fromEnv.stop();
    await fromEnv.exitCode;

    const generated = run({});
    expect((await generated.firstLine).apiKey).toMatch(/^sim-[0-9a-f]{32}$/);
    generated.stop();
    expect(await generated.exitCode).toBe(0);
  });

  it('applies the limit and fault flags', async () => {
    const running = run({
      seed: 'p/j',
      'send-limit': '1/1h',
      'fault-5xx': '0',
      latency: '10ms..20ms',
    });
    const { url, apiKey } = await running.firstLine;
    expect((await send(url, 'p', 'j', 'a', { key: apiKey })).status).toBe(200);
    expect((await send(url, 'p', 'j', 'b', { key: apiKey })).status).toBe(429);
    running.stop();
    await running.exitCode;
  });

  it.each([
    [{ port: 'http' }, '--port'],
    [{ 'work-time': 'soon' }, '--work-time'],
    [{ 'send-limit': '100' }, '--send-limit'],
    [{ 'fault-5xx': '1.5' }, '--fault-5xx'],
    [{ 'fault-timeout': '' }, '--fault-timeout'],
    [{ latency: '50ms..10ms' }, '--latency'],
    [{ seed: 'no-slash' }, '--seed'],
  ])('rejects %j naming %s', async (values, flag) => {
    const running = run(values);
    const err = await running.exitCode.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message.startsWith(`${flag}:`)).toBe(true);
  });

  it('answers --help with a usage that says the printed key is not a secret', () => {
    expect(simulateCommand.name).toBe('simulate');
    expect(simulateCommand.details).toMatch(/not a secret/);
    expect(Object.keys(simulateCommand.options)).toEqual(
      expect.arrayContaining([
        'port',
        'host',
        'key',
        'work-time',
        'send-limit',
        'stale-terminal',
        'auto-create',
        'seed',
        'fault-5xx',
        'fault-timeout',
        'fault-reset',
        'latency',
      ]),
    );
  });
});
