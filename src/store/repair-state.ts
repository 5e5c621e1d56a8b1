import { OPEN_WALK_START } from './open-index.js';
import { redisNow, type StoreState } from './store-state.js';

/**
 * Where the poller's repair sweep stands (poller/repair.ts): the running pass in `repair:pass`,
 * only ever changed by the pass's own poller (compare and set on its start), the last complete
 * pass in `repair:last`, and the estimate of the open dispatches a pass sizes its pages from.
 */

/**
 * A running repair pass: where it goes on, when it began and is planned to end, how many open
 * dispatches it read in how many ticks so far (times by Redis's clock, ms).
 */
export interface RepairPass {
  readonly cursor: string;
  readonly startedAt: number;
  readonly endsAt: number;
  readonly checked: number;
  readonly ticks: number;
  /** Redis's clock now. */
  readonly nowMs: number;
}

const PASS_FIELDS = ['cursor', 'startedAt', 'endsAt', 'checked', 'ticks'] as const;

/** Sizes of the per-project open counts read in one call (HVALS, or HSCAN's COUNT past it). */
const COUNTS_PART = 1_000;

/** One move of a pass ({@link moveRepairCursor}). */
export interface RepairMove {
  /** The pass's start: it identifies the pass. */
  readonly startedAt: number;
  /** Where it goes on; `undefined`: it is over. */
  readonly cursor: string | undefined;
  /** Open dispatches read since the last move. */
  readonly checked: number;
  /** This move is its tick's first. */
  readonly tick: boolean;
}

/**
 * The running repair pass, or a new one, planned to end within `graceMs`, when none runs and
 * none began within `graceMs`; `undefined`: no pass is due.
 */
export async function startRepairPass(
  state: StoreState,
  graceMs: number,
): Promise<RepairPass | undefined> {
  const { redis, keys } = state;
  const [cursor, startedAt, endsAt, checked, ticks] = await redis.hmget(
    keys.repairPass,
    ...PASS_FIELDS,
  );
  const nowMs = await redisNow(state);
  if (typeof cursor === 'string' && startedAt) {
    const began = Number(startedAt);
    // A pass begun by a version that planned no end: it ends a grace after its start.
    const ends = endsAt ? Number(endsAt) : began + graceMs;
    return {
      cursor,
      startedAt: began,
      endsAt: ends,
      checked: Number(checked ?? 0),
      ticks: Number(ticks ?? 0),
      nowMs,
    };
  }
  if ((await redis.set(keys.repairGate, '1', 'PX', graceMs, 'NX')) !== 'OK') return undefined;
  const pass = {
    cursor: OPEN_WALK_START,
    startedAt: nowMs,
    endsAt: nowMs + graceMs,
    checked: 0,
    ticks: 0,
  };
  await redis
    .multi()
    .hset(keys.repairPass, pass)
    .pexpire(keys.repairPass, 10 * graceMs)
    .exec();
  return { ...pass, nowMs };
}

/**
 * About how many are open: the open index's size or the sum of the open counts, if more. The
 * counts are read in parts of {@link COUNTS_PART} projects; counts that cannot be read (a key of
 * the wrong type) leave the open index's size.
 */
export async function openEstimate(state: StoreState): Promise<number> {
  const { redis, keys } = state;
  const indexed = await redis.zcard(keys.open);
  const counted = await sumOpenCounts(state).catch(() => 0);
  return Math.max(indexed, counted);
}

/**
 * Records where the pass that began at `startedAt` goes on next (`undefined`: it is over) and
 * what it read since the last move, if that pass still runs; `false`: it does not (ended, or
 * another began), and nothing was written.
 */
export async function moveRepairCursor(
  state: StoreState,
  move: RepairMove,
  graceMs: number,
): Promise<boolean> {
  const { scripts, keys } = state;
  const args = [move.startedAt, move.cursor ?? '', move.checked, move.tick ? 1 : 0, 10 * graceMs];
  return (await scripts.run('moveRepair', [keys.repairPass, keys.repairLast], args)) === 1;
}

/** The sum of the per-project open counts: one HVALS while they are few, else HSCAN in parts. */
async function sumOpenCounts({ redis, keys }: StoreState): Promise<number> {
  const add = (sum: number, n: string) => sum + Math.max(0, Number(n) || 0);
  if ((await redis.hlen(keys.openCounts)) <= COUNTS_PART)
    return (await redis.hvals(keys.openCounts)).reduce(add, 0);
  let sum = 0;
  let cursor = '0';
  do {
    const [next, flat] = await redis.hscan(keys.openCounts, cursor, 'COUNT', COUNTS_PART);
    sum = flat.filter((_, i) => i % 2 === 1).reduce(add, sum);
    cursor = next;
  } while (cursor !== '0');
  return sum;
}
