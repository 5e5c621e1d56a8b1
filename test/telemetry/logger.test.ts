import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, logFormatFor } from '../../src/telemetry/logger.js';
import { runCli, runCliToEnd } from '../support/cli.js';
import { eventually, withNamespace } from '../support/namespace.js';
import { TEST_API_KEY } from '../support/simulator.js';

/** Collects what a stream is written, as text. */
function sink(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { stream, text: () => text };
}

describe('log format', () => {
  it('writes pretty lines for a person, with the same redaction as JSON lines', async () => {
    const out = sink();
    const logger = createLogger('info', out.stream, 'pretty');
    logger.info({ dispatchId: 'd-1', apiKey: 'sk-live-secret' }, 'followup:sent');
    logger.warn({ headers: { authorization: 'Bearer sk-live-secret' } }, 'project:parked');
    await eventually(async () => (out.text().split('\n').length > 2 ? true : undefined));
    const lines = out.text().trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: followup:sent .*dispatchId.*d-1/);
    expect(lines[1]).toMatch(/WARN: project:parked/);
    for (const line of lines) {
      expect(line.startsWith('{')).toBe(false);
      expect(line).not.toContain('sk-live-secret');
      expect(line).toContain('[redacted]');
    }
  });

  it('is JSON unless a person is certainly reading, and LOG_FORMAT wins', () => {
    // Vitest's standard output is a pipe, as a container's or a service manager's is.
    expect(process.stdout.isTTY).not.toBe(true);
    expect(logFormatFor(undefined, true)).toBe('json');
    expect(logFormatFor(undefined, false)).toBe('json');
    expect(logFormatFor('pretty', false)).toBe('pretty');
    expect(logFormatFor('json', true)).toBe('json');
  });

  it('makes a role process log pretty with LOG_FORMAT=pretty, and rejects an unknown format', async () => {
    await withNamespace('logfmt', async (ns) => {
      const env = ns.env({
        AGENT_API_KEY: TEST_API_KEY,
        AGENT_API_URL: 'http://127.0.0.1:9',
        LOG_LEVEL: 'info',
      });
      const bad = await runCliToEnd(['worker'], { ...env, LOG_FORMAT: 'xml' });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('LOG_FORMAT: expected one of json, pretty');

      const worker = runCli(['worker'], { ...env, LOG_FORMAT: 'pretty' });
      await eventually(
        async () => (worker.output.stdout.includes('role:started') ? true : undefined),
        {
          timeoutMs: 20_000,
          what: 'the worker to start',
        },
      );
      expect(await worker.stop()).toBe(0);
      const lines = worker.output.stdout.trim().split('\n');
      expect(lines.some((line) => /INFO: role:started/.test(line))).toBe(true);
      expect(lines.filter((line) => line.startsWith('{'))).toEqual([]);
      expect(worker.output.stdout).not.toContain(TEST_API_KEY);
    });
  });
});
