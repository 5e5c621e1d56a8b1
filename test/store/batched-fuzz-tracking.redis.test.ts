import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StoreItemError } from '../../src/store/call-batch.js';
import type { DispatchRecord } from '../../src/dispatch/record.js';
import type { DispatchRef } from '../../src/store/store.js';
import { keysFor } from '../../src/redis/keys.js';
import { useStore } from '../support/store.js';
import { itemState, poison, type Poison, sideAToB } from '../support/poison.js';

/**
 * Differential fuzz of the batched MARK_SENT, RESCHEDULE and FINISH, as batched-fuzz does for
 * ACQUIRE: mirror projects with (`a…`) and without (`b…`) one poisoned item run in the same call;
 * every other item answers and writes as its mirror, and the poisoned one writes nothing.
 */
type Op = 'mark_sent' | 'reschedule' | 'finish';

/** The poisons that break each op (the keys it reads or writes). */
const POISONS_OF: Record<Op, readonly Poison[]> = {
  mark_sent: ['record-not-a-hash'],
  reschedule: ['record-not-a-hash'],
  finish: ['record-not-a-hash', 'lane-not-a-list', 'lane-heads-not-a-hash', 'budget-not-a-zset'],
};

describe.each(['mark_sent', 'reschedule', 'finish'] as const)(
  'a batched %s with one poisoned item (differential fuzz)',
  (op) => {
    const fixture = useStore(`fuzz-${op}`);
    const rate = { max: 100, windowMs: 60_000 };
    const scenario = fc.record({
      projects: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 6 }),
      poisonAt: fc.nat(),
      poison: fc.constantFrom(...POISONS_OF[op]),
    });
    let run = 0;

    /** Runs `op` for each ref (one turn: one script call), settled. */
    function runOp(refs: readonly DispatchRef[], records: Map<string, DispatchRecord>) {
      const { store } = fixture();
      return Promise.allSettled(
        refs.map(async (ref): Promise<unknown> => {
          if (op === 'mark_sent') return store.markSent(ref, 'sent', undefined, 60_000, 'T');
          if (op === 'reschedule')
            return store.tracking.reschedule(ref.dispatchId, 5_000, { pollDelayMs: 5_000 });
          const record = records.get(ref.dispatchId);
          if (!record) throw new Error('no record read');
          const { nextDispatchId, ...rest } = await store.finish(record, {
            type: 'followup.completed',
          });
          return { ...rest, hasNext: nextDispatchId !== undefined };
        }),
      );
    }

    it('every other item answers and writes as without it; the poisoned one writes nothing', async () => {
      const { ns, store, producer } = fixture();
      const at = keysFor(ns.prefix);
      await fc.assert(
        fc.asyncProperty(scenario, async ({ projects, poisonAt, poison: kind }) => {
          run++;
          const project = (side: string, p: number | string) => `r${run}${side}${p}`;
          const inputs = (side: string) => [
            ...projects.map((p, i) => ({
              projectId: project(side, p),
              jobId: 'j0',
              prompt: `${i}`,
            })),
            { projectId: project(side, 'x'), jobId: 'j0', prompt: 'head' },
            { projectId: project(side, 'x'), jobId: 'j0', prompt: 'poisoned' },
          ];
          const all = [...inputs('a'), ...inputs('b')];
          const accepted = await producer.sendMany(all);
          const refs = accepted.map(({ dispatchId }, i) => ({
            dispatchId,
            projectId: all[i]!.projectId,
            jobId: 'j0',
          }));
          const half = refs.length / 2;
          const [sideA, sideB] = [refs.slice(0, half), refs.slice(half)];
          // Lane heads go (token T); the others stay queued behind them.
          for (const ref of refs) await store.acquire(ref, rate, 50, 60_000, 'T');
          const records = new Map<string, DispatchRecord>();
          for (const ref of refs) {
            const record = await store.sends.get(ref.dispatchId);
            if (record) records.set(ref.dispatchId, record);
          }
          const poisoned = sideA[half - 1]!;
          if (op === 'reschedule') await ns.redis.zadd(at.tracked, 1, poisoned.dispatchId);
          await poison(ns.redis, at, kind, poisoned, sideA[half - 2]!);
          const untouched = await itemState(ns.redis, at, poisoned, sideA[half - 2]!);

          const callA = sideA.slice(0, projects.length);
          const position = poisonAt % (callA.length + 1);
          callA.splice(position, 0, poisoned);
          const answers = await runOp([...callA, ...sideB.slice(0, projects.length)], records);
          const [withPoison, without] = [
            answers.slice(0, callA.length),
            answers.slice(callA.length),
          ];
          const rejected = withPoison.splice(position, 1)[0]!;
          expect(without.map((r) => r.status)).toEqual(without.map(() => 'fulfilled'));
          expect(withPoison).toEqual(without);
          expect(await itemState(ns.redis, at, poisoned, sideA[half - 2]!)).toEqual(untouched);
          expect((rejected as PromiseRejectedResult).reason).toBeInstanceOf(StoreItemError);

          const map = sideAToB(sideA, sideB, half, project);
          const read = async (ref: DispatchRef, mapped: (s: string) => string) => {
            const record = await ns.redis.hgetall(at.dispatch(ref.dispatchId));
            for (const field of ['bullJobId', 'finishedAt', 'sentAt', 'sendingAt', 'eventId'])
              delete record[field];
            return {
              record: Object.fromEntries(Object.entries(record).map(([f, v]) => [f, mapped(v)])),
              tracked: (await ns.redis.zscore(at.tracked, ref.dispatchId)) !== null,
              heads: Object.values(await ns.redis.hgetall(at.laneHeads(ref.projectId))).map(mapped),
              lane: (await ns.redis.lrange(at.lane(ref.projectId, 'j0'), 0, -1)).map(mapped),
              budget: (await ns.redis.zrange(at.budget(ref.projectId), 0, -1)).map(mapped).sort(),
            };
          };
          for (let i = 0; i < projects.length; i++)
            expect(await read(sideA[i]!, map)).toEqual(await read(sideB[i]!, (s) => s));
        }),
        { numRuns: 15 },
      );
    }, 120_000);
  },
);
