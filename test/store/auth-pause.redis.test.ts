import { describe, expect, it } from 'vitest';
import type { DispatchRef, Verdict } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';

const RATE = { max: 1000, windowMs: 1_000 };

describe('the fleet-wide pause after a rejected key (ACQUIRE, REQUEUE, AUTH_PAUSE)', () => {
  const fixture = useStore('auth-pause');

  async function heads(count: number): Promise<DispatchRef[]> {
    const inputs = Array.from({ length: count }, (_, i) => ({
      projectId: 'p',
      jobId: `j${i}`,
      prompt: `#${i}`,
    }));
    const results = await fixture().producer.sendMany(inputs);
    return results.map((r, i) => ({ dispatchId: r.dispatchId, projectId: 'p', jobId: `j${i}` }));
  }
  // One attempt token per dispatch: each ACQUIRE here stands for one worker's run.
  const tokenOf = (ref: DispatchRef) => `token-${ref.dispatchId}`;
  const acquire = (ref: DispatchRef) => fixture().store.acquire(ref, RATE, 50, 1_000, tokenOf(ref));
  const acquireAll = (refs: readonly DispatchRef[]) => Promise.all(refs.map(acquire));
  const untilOf = (v: Verdict) => (v.kind === 'auth_paused' ? v.untilMs : undefined);
  const sleepUntil = (ms: number) =>
    new Promise((r) => setTimeout(r, Math.max(0, ms - Date.now())));

  it('holds every send, lets one probe through per backoff, refunds it, and resumes', async () => {
    const refs = await heads(6);
    const started = await fixture().store.pause.start(401, {
      firstBackoffMs: 200,
      maxBackoffMs: 400,
    });
    expect(started.started).toBe(true);
    // The pause is fleet-wide and starts once: the next rejection finds it already on.
    expect((await fixture().store.pause.start(403)).started).toBe(false);
    expect(await fixture().store.pause.current()).toMatchObject({ httpStatus: 401 });

    const held = await acquireAll(refs);
    expect(held.map((v) => v.kind)).toEqual(Array(6).fill('auth_paused'));
    expect(new Set(held.map(untilOf))).toEqual(new Set([started.probeAt]));
    // Held sends spent nothing: no attempt, no budget, nothing tracked.
    for (const ref of refs)
      expect(await fixture().store.sends.get(ref.dispatchId)).toMatchObject({
        state: 'queued',
        attempts: 0,
      });
    expect(await fixture().ns.redis.zcard(keysFor(fixture().ns.prefix).budget('p'))).toBe(0);
    expect(await fixture().ns.redis.zcard(keysFor(fixture().ns.prefix).tracked)).toBe(0);

    // Probe time: exactly one ACQUIRE of the fleet goes, as the probe; the rest wait 2x longer.
    const gaps: number[] = [];
    let probeAt = started.probeAt;
    for (const round of [1, 2, 3]) {
      await sleepUntil(probeAt + 5);
      const verdicts = await acquireAll(refs);
      const goes = verdicts.filter((v) => v.kind === 'go');
      expect(goes, `round ${round}`).toHaveLength(1);
      expect(goes[0]).toMatchObject({ probe: true });
      const next = verdicts.map(untilOf).filter((n) => n !== undefined);
      expect(new Set(next).size).toBe(1);
      gaps.push((next[0] as number) - probeAt);
      probeAt = next[0] as number;
      // The probe was rejected again: back to queued, its budget unit given back.
      const probe = refs[verdicts.findIndex((v) => v.kind === 'go')] as DispatchRef;
      const attempt = goes[0]?.kind === 'go' ? goes[0].attempt : 0;
      expect(await fixture().store.tracking.requeue(probe, attempt, tokenOf(probe), true)).toBe(0);
      expect(await fixture().ns.redis.zcard(keysFor(fixture().ns.prefix).budget('p'))).toBe(0);
      expect((await fixture().store.pause.start(401)).started).toBe(false);
    }
    // Backoff doubles (200 → 400) and is capped (400), measured from each probe.
    expect(gaps[0]).toBeGreaterThanOrEqual(400);
    expect(gaps[0]).toBeLessThan(450);
    expect(gaps[1]).toBeGreaterThanOrEqual(400);
    expect(gaps[1]).toBeLessThan(450);

    // The jobs the pause parked are handed back once, for the caller to wake at the end.
    await fixture().store.pause.noteParked('job-a');
    await fixture().store.pause.noteParked('job-b');
    const ended = await fixture().store.pause.end();
    expect({ ...ended, parked: [...ended.parked].sort() }).toEqual({
      resumed: true,
      parked: ['job-a', 'job-b'],
    });
    expect(await fixture().store.pause.end()).toEqual({ resumed: false, parked: [] });
    expect(await fixture().store.pause.current()).toBeUndefined();
    const after = await acquireAll(refs);
    expect(after.map((v) => v.kind)).toEqual(Array(6).fill('go'));
    expect(after.every((v) => v.kind === 'go' && !v.probe)).toBe(true);
  });

  it('shares the one probe per backoff between status reads and sends', async () => {
    const [ref] = await heads(1);
    expect(await fixture().store.pause.claimProbe()).toBe('none');
    const { probeAt } = await fixture().store.pause.start(401, {
      firstBackoffMs: 200,
      maxBackoffMs: 400,
    });
    expect(await fixture().store.pause.claimProbe()).toBe('wait');
    await sleepUntil(probeAt + 5);
    expect(
      await Promise.all([fixture().store.pause.claimProbe(), fixture().store.pause.claimProbe()]),
    ).toEqual(['probe', 'wait']);
    // The read took this probe: a send must wait for the next one.
    expect((await acquire(ref as DispatchRef)).kind).toBe('auth_paused');
    await fixture().store.pause.end();
    expect(await fixture().store.pause.claimProbe()).toBe('none');
  });

  it('never stores the key or any server text in the flag', async () => {
    await fixture().store.pause.start(302);
    const flag = await fixture().ns.redis.hgetall(keysFor(fixture().ns.prefix).authPause);
    expect(Object.keys(flag).sort()).toEqual([
      'backoffMs',
      'httpStatus',
      'maxBackoffMs',
      'probeAt',
      'since',
    ]);
  });
});
