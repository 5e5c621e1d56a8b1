import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { within } from '../src/time/deadline.js';
import { runCli, runProgram } from './support/cli.js';
import { eventually, useNamespace } from './support/namespace.js';
import { FAST_SETTINGS } from './support/service.js';

const EXAMPLE = fileURLToPath(new URL('../examples/python/send_and_follow.py', import.meta.url));
const INTAKE_TOKEN = 'python-intake-token-0123';
const EVENTS_TOKEN = 'python-events-token-0123';

describe('examples/python/send_and_follow.py', () => {
  const ns = useNamespace('example-python');

  it('sends through the intake, follows the status, and reads the events over SSE', async () => {
    const env = ns().env({ ...FAST_SETTINGS, HTTP_PORT: '0', INTAKE_TOKEN, EVENTS_TOKEN });
    const service = runCli(['start', '--simulator'], env);
    try {
      const url = await eventually(
        () => /intake: POST (\S+)\/v1\/followups/.exec(service.output.stderr)?.[1],
        { timeoutMs: 60_000, what: 'the intake line of start' },
      );
      const args = ['--project', 'docs', '--job', 'job-1', '--prompt', 'one', '--prompt', 'two'];
      const example = runProgram('python3', [EXAMPLE, ...args], {
        AGENT_DISPATCH_URL: url,
        INTAKE_TOKEN,
        EVENTS_TOKEN,
        // No __pycache__ beside the example in the checkout.
        PYTHONDONTWRITEBYTECODE: '1',
      });
      const code = await example.exited;
      expect(example.output.stderr).toBe('');
      expect(code).toBe(0);
      const lines = example.output.stdout.trim().split('\n');
      const sent = lines.filter((l) => l.startsWith('sent ')).map((l) => l.split(' ')[1]);
      expect(sent).toHaveLength(2);
      for (const id of sent) {
        expect(lines).toContain(`status ${id} done followup.completed`);
        expect(lines).toContainEqual(
          expect.stringMatching(new RegExp(`^event followup\\.completed ${id} cursor=\\d+-\\d+$`)),
        );
      }
      expect(lines.at(-1)).toBe('done: 2 follow-ups, each with its event');

      // A refused request (here a wrong token) ends the example with the answer, not a retry loop
      // that its --timeout never sees.
      const refused = runProgram('python3', [EXAMPLE, ...args, '--timeout', '5'], {
        AGENT_DISPATCH_URL: url,
        INTAKE_TOKEN,
        EVENTS_TOKEN: 'not-the-events-token',
        PYTHONDONTWRITEBYTECODE: '1',
      });
      const refusedCode = await within(refused.exited, 30_000, () => {
        void refused.stop('SIGKILL');
        throw new Error(`the example still runs: ${refused.output.stderr.slice(-300)}`);
      });
      expect(refusedCode).toBe(1);
      expect(refused.output.stderr).toMatch(/^events: HTTP 401: .*unknown bearer token/m);
    } finally {
      expect(await service.stop('SIGTERM')).toBe(0);
    }
  });
});
