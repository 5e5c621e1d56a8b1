import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StoreItemError } from '../../src/store/call-batch.js';
import type { DispatchRef } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';
import { itemState, POISONS, poison, sideAToB } from '../support/poison.js';

/**
 * Differential fuzz of the batched ACQUIRE: a random call of follow-ups of several projects (own
 * limits, shared lanes, spent budgets), one item poisoned somewhere in it (a key of the wrong type,
 * a stored value out of range). Every other item must answer and write exactly as it does in a
 * call without the poisoned one: both run side by side in the same script call (the same `now`),
 * on mirror projects (`a…` with the poison, `b…` without), and their keys are compared mapped.
 * The poisoned item writes nothing.
 */
/** A zset read WITHSCORES as `member score` strings, members mapped, sorted. */
function pairs(flat: string[], mapped: (s: string) => string): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2) out.push(`${mapped(flat[i] ?? '')} ${flat[i + 1]}`);
  return out.sort();
}

describe('a batched ACQUIRE with one poisoned item (differential fuzz)', () => {
  const fixture = useStore('fuzz');
  const rate = { max: 3, windowMs: 60_000 };

  /** One healthy item: its project and agent job; `before`: ACQUIREs of its project spent first. */
  const healthy = fc.record({
    project: fc.integer({ min: 0, max: 2 }),
    job: fc.integer({ min: 0, max: 1 }),
  });
  const scenario = fc.record({
    items: fc.array(healthy, { minLength: 1, maxLength: 6 }),
    limits: fc.array(
      fc.option(
        fc.record({
          max: fc.integer({ min: 1, max: 3 }),
          windowMs: fc.integer({ min: 1_000, max: 90_000 }),
        }),
      ),
      { minLength: 3, maxLength: 3 },
    ),
    spent: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 3, maxLength: 3 }),
    poisonAt: fc.nat(),
    poison: fc.constantFrom(...POISONS),
  });

  let run = 0;
  it('every other item answers and writes as without it; the poisoned one writes nothing', async () => {
    const { ns, store, producer } = fixture();
    const at = keysFor(ns.prefix);
    await fc.assert(
      fc.asyncProperty(scenario, async ({ items, limits, spent, poisonAt, poison: kind }) => {
        run++;
        const project = (side: string, p: number | 'x') => `r${run}${side}${p}`;
        const inputs = (side: string) => [
          ...items.map(({ project: p, job }, i) => ({
            projectId: project(side, p),
            jobId: `j${job}`,
            prompt: `${p}/${job}/${i}`,
          })),
          // The poisoned project: a head (for the poison of a head's record), then the item.
          { projectId: project(side, 'x'), jobId: 'j0', prompt: 'head' },
          { projectId: project(side, 'x'), jobId: 'j0', prompt: 'poisoned' },
        ];
        const accepted = await producer.sendMany([...inputs('a'), ...inputs('b')]);
        const refs = accepted.map(({ dispatchId }, i) => {
          const input = [...inputs('a'), ...inputs('b')][i]!;
          return { dispatchId, projectId: input.projectId, jobId: input.jobId };
        });
        const half = refs.length / 2;
        const [sideA, sideB] = [refs.slice(0, half), refs.slice(half)];
        const t0 = Date.now();
        // Both sides alike: the limits, a budget partly spent by earlier sends, the head acquired.
        for (const side of ['a', 'b']) {
          for (const [p, limit] of limits.entries()) {
            if (limit)
              await ns.redis.hset(at.projectControls(project(side, p)), {
                limit: 'x',
                max: limit.max,
                windowMs: limit.windowMs,
                toleranceMs: 50,
              });
            for (let n = 0; n < (spent[p] ?? 0); n++)
              await ns.redis.zadd(at.budget(project(side, p)), t0 - 1_000 * n, `old${n}`);
          }
        }
        const poisoned = sideA[sideA.length - 1]!;
        const head = sideA[sideA.length - 2]!;
        await poison(ns.redis, at, kind, poisoned, head);
        const untouched = await itemState(ns.redis, at, poisoned, head);

        const callA: DispatchRef[] = sideA.slice(0, items.length);
        const position = poisonAt % (callA.length + 1);
        callA.splice(position, 0, poisoned);
        const tokenOf = (ref: DispatchRef) => `T${refs.indexOf(ref) % half}`;
        const answers = await Promise.allSettled(
          [...callA, ...sideB.slice(0, items.length)].map((ref) =>
            store.acquire(ref, rate, 50, 60_000, tokenOf(ref)),
          ),
        );
        const [withPoison, without] = [answers.slice(0, callA.length), answers.slice(callA.length)];
        const rejected = withPoison.splice(position, 1)[0]!;
        expect(without.map((r) => r.status)).toEqual(without.map(() => 'fulfilled'));
        expect(withPoison).toEqual(without);
        expect(await itemState(ns.redis, at, poisoned, head)).toEqual(untouched);
        expect(rejected.status).toBe('rejected');
        expect((rejected as PromiseRejectedResult).reason).toBeInstanceOf(StoreItemError);
        // The healthy items' keys, side a mapped onto side b.
        const map = sideAToB(sideA, sideB, half, project);
        for (let i = 0; i < items.length; i++) {
          const [a, b] = [sideA[i]!, sideB[i]!];
          const read = async (ref: DispatchRef, mapped: (s: string) => string) => {
            const record = await ns.redis.hgetall(at.dispatch(ref.dispatchId));
            delete record['bullJobId'];
            return {
              record: Object.fromEntries(Object.entries(record).map(([f, v]) => [f, mapped(v)])),
              tracked: await ns.redis.zscore(at.tracked, ref.dispatchId),
              budget: pairs(
                await ns.redis.zrange(at.budget(ref.projectId), 0, -1, 'WITHSCORES'),
                mapped,
              ),
              budgetTtl: (await ns.redis.pttl(at.budget(ref.projectId))) > 0,
              heads: Object.values(await ns.redis.hgetall(at.laneHeads(ref.projectId)))
                .map(mapped)
                .sort(),
              lane: (await ns.redis.lrange(at.lane(ref.projectId, ref.jobId), 0, -1)).map(mapped),
            };
          };
          expect(await read(a, map)).toEqual(await read(b, (s) => s));
        }
      }),
      { numRuns: 30 },
    );
  }, 120_000);
});
