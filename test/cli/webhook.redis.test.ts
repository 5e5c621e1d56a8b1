import { describe, expect, it } from 'vitest';
import { runCliToEnd } from '../support/cli.js';
import { useNamespace } from '../support/namespace.js';

describe('agent-dispatch webhook', () => {
  const ns = useNamespace('cli-webhook', { scope: 'all' });
  const cli = (args: string[], settings: Record<string, string> = {}) =>
    runCliToEnd(['webhook', ...args], ns().env(settings));

  it(
    'adds, lists, removes; dead answers JSON (redrive: test/http/webhooks)',
    { timeout: 180_000 },
    async () => {
      const added = await cli([
        'add',
        'http://127.0.0.1:9/hook',
        '--project',
        'p1',
        '--project',
        'p2',
        '--type',
        'followup.completed',
      ]);
      expect(added.code).toBe(0);
      const subscription = JSON.parse(added.stdout) as { id: string; secret: string };
      expect(subscription).toMatchObject({ projects: ['p1', 'p2'], types: ['followup.completed'] });
      expect(subscription.secret).toMatch(/^whsec_/);
      const listed = await cli(['list']);
      expect(JSON.parse(listed.stdout)).toMatchObject({ webhooks: [{ id: subscription.id }] });
      expect(listed.stdout).not.toContain('whsec_');
      expect(JSON.parse((await cli(['dead'])).stdout)).toEqual({ dead: [] });
      expect((await cli(['remove', subscription.id])).code).toBe(0);
      const again = await cli(['remove', subscription.id]);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain(`no webhook subscription ${subscription.id}`);
    },
  );

  it(
    'exits 2 naming the field or the setting, never echoing a secret',
    { timeout: 180_000 },
    async () => {
      const badUrl = await cli(['add', 'ftp://example.com']);
      expect(badUrl.code).toBe(2);
      expect(badUrl.stderr.trim()).toBe('agent-dispatch: url: expected an http:// or https:// URL');
      const badSecret = await cli(['list'], {
        WEBHOOK_URL: 'http://127.0.0.1:9/',
        WEBHOOK_SECRET: 'not-a-secret-at-all',
      });
      expect(badSecret.code).toBe(2);
      expect(badSecret.stderr.trim()).toBe(
        'agent-dispatch: WEBHOOK_SECRET: expected whsec_ followed by the base64 of 16 to 64 bytes',
      );
      const alone = await cli(['list'], { WEBHOOK_URL: 'http://127.0.0.1:9/' });
      expect(alone.code).toBe(2);
      expect(alone.stderr.trim()).toBe(
        'agent-dispatch: WEBHOOK_SECRET: is required when WEBHOOK_URL is set',
      );
      const help = await cli(['--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('redrive');
    },
  );
});
