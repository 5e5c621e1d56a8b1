import { describe, expect, it } from 'vitest';
import { verifyDeployment } from '../../src/cli/deployment.js';
import { layoutKey } from '../../src/redis/keys.js';
import { LayoutError } from '../../src/redis/layout.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { adminOf } from '../support/admin.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';

const silent = createLogger('silent');

/**
 * A pause or a limit lives in the shard of its project, at the count it was set with: a role
 * that starts with another count while such controls exist would leave them behind, and the
 * paused project would send again. The start is refused instead, as with open follow-ups.
 */
describe('a new DISPATCH_SHARDS while project controls of the old count exist', () => {
  const ns = useNamespace('shard-controls', { shards: 4 });
  const admin = useOpened('admin', () => adminOf(ns()));

  it('is refused at the start, naming DISPATCH_SHARDS and the controls, and records nothing', async () => {
    // Before any role started (no count recorded): the pause goes where one shard keeps it.
    expect(await admin().pauseProject('P')).toMatchObject({ paused: true });
    const start = verifyDeployment(
      ns().config({ DISPATCH_SHARDS: '4' }),
      silent,
      new AbortController().signal,
    );
    await expect(start).rejects.toBeInstanceOf(LayoutError);
    await expect(start).rejects.toThrow(
      /^DISPATCH_SHARDS: is 4, but this Redis holds the controls \(pause, limit\) of 1 project set with DISPATCH_SHARDS=1/,
    );
    expect(await ns().redis.get(layoutKey(ns().prefix))).toBeNull();
    // Once they are cleared at the old count, the new count starts and is recorded.
    await admin().resumeProject('P');
    await verifyDeployment(
      ns().config({ DISPATCH_SHARDS: '4' }),
      silent,
      new AbortController().signal,
    );
    expect(await ns().redis.get(layoutKey(ns().prefix))).toBe('4');
  });
});
