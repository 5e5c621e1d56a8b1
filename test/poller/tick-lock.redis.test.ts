import { describe, expect, it } from 'vitest';
import { runTick } from '../../src/poller/tick.js';
import { keysFor } from '../../src/redis/keys.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { pollerResources, useService } from '../support/service.js';

/**
 * The poll tick's lock: the tick's first claim takes it (with DUE, the records and the parks in
 * one store call), so a tick that cannot take it claims nothing, and one that took it releases it
 * however the claim went on.
 */
describe('the poll tick’s lock', () => {
  const { simulator, ns } = useService('tick-lock');

  function resources() {
    const metrics = createMetrics();
    const ctx = pollerResources(ns(), simulator(), metrics);
    const ticks = async (outcome: string) =>
      (await metrics.pollTicks.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
    return { ctx, ticks };
  }

  /** The lock held by `holder`, one id tracked and due, and a tick's resources. */
  async function heldBy(holder: string) {
    const keys = keysFor(ns().prefix);
    await ns().redis.set(keys.pollLock, holder, 'PX', 60_000);
    await ns().redis.zadd(keys.tracked, 0, 'due-now');
    return { keys, ...resources() };
  }

  it('is released, and the tick counted failed, when the claim fails after taking it', async () => {
    const keys = keysFor(ns().prefix);
    // DUE reads the tracked set as a sorted set: a string there fails it, after the lock is taken.
    await ns().redis.set(keys.tracked, 'not a sorted set');
    const { ctx, ticks } = resources();
    try {
      await expect(runTick(ctx)).rejects.toThrow(/WRONGTYPE/);
      expect(await ns().redis.exists(keys.pollLock)).toBe(0);
      expect(await ticks('error')).toBe(1);
    } finally {
      await ctx.close();
    }
  });

  it('held by another tick until this one’s time is up: this one is skipped, claims nothing and leaves the lock as it was', async () => {
    const { keys, ctx, ticks } = await heldBy('another tick');
    try {
      expect(await runTick(ctx)).toEqual({ ran: false, reads: 0, finished: 0 });
      expect(await ns().redis.get(keys.pollLock)).toBe('another tick');
      expect(await ns().redis.zscore(keys.tracked, 'due-now')).toBe('0');
      expect(await ticks('skipped')).toBe(1);
    } finally {
      await ctx.close();
    }
  });

  it('released by the tick before while this one waits: this one takes it and runs', async () => {
    const { keys, ctx, ticks } = await heldBy('the tick before');
    try {
      const tick = runTick(ctx);
      // The tick before ends its reads a little after this one was due (POLL_INTERVAL is 100 ms).
      await new Promise((resolve) => setTimeout(resolve, 30));
      await ns().redis.del(keys.pollLock);
      expect((await tick).ran).toBe(true);
      expect(await ticks('ran')).toBe(1);
      expect(await ticks('skipped')).toBe(0);
      expect(await ns().redis.exists(keys.pollLock)).toBe(0);
    } finally {
      await ctx.close();
    }
  });

  it('released after this one, told to stop, went to sleep between its looks: this one is skipped and claims nothing', async () => {
    const { keys, ctx, ticks } = await heldBy('the tick before');
    const { poll } = ctx.store;
    const takeLock = poll.takeLock.bind(poll);
    let firstLook: (taken: boolean) => void = () => {};
    const looked = new Promise<boolean>((resolve) => (firstLook = resolve));
    poll.takeLock = async (token, lockMs) => {
      const taken = await takeLock(token, lockMs);
      firstLook(taken);
      return taken;
    };
    let stop = false;
    try {
      const tick = runTick(ctx, () => stop);
      expect(await looked).toBe(false);
      // It sleeps 10 ms before it looks again: told to stop meanwhile, the lock free, it looks no more.
      await new Promise((resolve) => setTimeout(resolve, 2));
      stop = true;
      await ns().redis.del(keys.pollLock);
      expect(await tick).toEqual({ ran: false, reads: 0, finished: 0 });
      expect(await ticks('skipped')).toBe(1);
      expect(await ns().redis.exists(keys.pollLock)).toBe(0);
      expect(await ns().redis.zscore(keys.tracked, 'due-now')).toBe('0');
    } finally {
      await ctx.close();
    }
  });

  it('lapsed while a tick read: renewed by taking it again when free, and no claim once another tick holds it', async () => {
    const keys = keysFor(ns().prefix);
    await ns().redis.zadd(keys.tracked, 0, 'due-1', 0, 'due-2');
    const { ctx } = resources();
    const renew = { token: 'this tick', lockMs: 60_000, step: 'renew' } as const;
    try {
      // Expired, nobody took it: this tick holds it again and claims.
      const again = await ctx.store.poll.claim(1, 60_000, renew);
      expect(again?.ids).toEqual(['due-1']);
      expect(await ns().redis.get(keys.pollLock)).toBe('this tick');
      // Taken by another tick meanwhile: this one claims nothing more, and leaves it.
      await ns().redis.set(keys.pollLock, 'another tick', 'PX', 60_000);
      expect(await ctx.store.poll.claim(1, 60_000, renew)).toBeUndefined();
      expect(await ns().redis.get(keys.pollLock)).toBe('another tick');
      expect(await ns().redis.zscore(keys.tracked, 'due-2')).toBe('0');
    } finally {
      await ctx.close();
    }
  });
});
