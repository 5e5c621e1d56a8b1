import { Redis } from 'ioredis';
import { startPrivateRedis, type PrivateRedis } from '../test/support/redis-server.js';
import { infoNumber, machineBusyMs } from './probes.js';
import type { Schedule } from './schedule.js';

/**
 * What every scenario shares: a private `redis-server` (AOF `appendfsync everysec`, as production
 * runs it; never the shared one on 6379), an admin connection to it, and a fresh namespace per run.
 */

/** The bearer key of the bench's simulators and of every role they serve. */
export const BENCH_API_KEY = 'bench-key-0123456789';

/** A run's own corner of Redis: key prefix and events stream. */
export interface Namespace {
  readonly prefix: string;
  readonly eventsStream: string;
}

/** Shared state of one `npm run bench`. */
export interface BenchContext {
  readonly redisUrl: string;
  /** Options for a BullMQ Queue of the bench's own: BullMQ opens and closes that connection. */
  readonly connection: { readonly host: string; readonly port: number };
  /** Admin connection: INFO, FLUSHALL, stream reads. */
  readonly admin: Redis;
  /** The redis-server's pid, for its CPU time. */
  readonly redisPid: number;
  readonly redisVersion: string;
  /** Shorter runs and fewer repetitions, for development. */
  readonly quick: boolean;
  /** Runs behind a median: 3, or 1 in quick mode. */
  readonly repeats: number;
  /** Whether one more repeat, expected to take `estimateMs`, fits the run's time budget. */
  mayRepeat(estimateMs: number): boolean;
  /**
   * Empties Redis, compacts its AOF and waits a little for the machine to be quiet, then hands
   * out a new namespace.
   */
  fresh(label: string): Promise<Namespace>;
  /** Prints one progress line, prefixed with the scenario. */
  progress(scenario: string, line: string): void;
  close(): Promise<void>;
}

/** Starts the private Redis and builds the context. */
export async function createContext(quick: boolean, schedule: Schedule): Promise<BenchContext> {
  const server: PrivateRedis = await startPrivateRedis();
  const admin = new Redis(server.url, { maxRetriesPerRequest: null });
  const redisPid = await infoNumber(admin, 'server', 'process_id');
  const redisVersion = /^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1] ?? '?';
  let runs = 0;
  const started = Date.now();
  const quiet = quietGate();
  return {
    redisUrl: server.url,
    connection: { host: '127.0.0.1', port: server.port },
    admin,
    redisPid,
    redisVersion,
    quick,
    repeats: quick ? 1 : 3,
    mayRepeat: (estimateMs) => schedule.allows(estimateMs),
    async fresh(label) {
      await admin.flushall();
      await compactAof(admin);
      const busy = await quiet();
      if (busy > QUIET_CORES) {
        process.stdout.write(
          `  (other programs keep ${busy.toFixed(2)} cores busy; measuring anyway)\n`,
        );
      }
      runs += 1;
      const prefix = `bench-${label}-${runs}`;
      return { prefix, eventsStream: `${prefix}:events` };
    },
    progress(scenario, line) {
      const clock = ((Date.now() - started) / 1000).toFixed(0).padStart(4);
      process.stdout.write(`[${clock} s] ${scenario.padEnd(10)} ${line}\n`);
    },
    async close() {
      admin.disconnect();
      await server.destroy();
    },
  };
}

/**
 * Rewrites the AOF after a flush, so every run starts with a small file and no run pays for a
 * rewrite that earlier runs' data triggered; waits until no rewrite runs or is scheduled, so no
 * fork happens during the run (while a child runs, Redis defers growing hash tables: a job hash
 * of the baseline would weigh 32 bytes less).
 */
async function compactAof(admin: Redis): Promise<void> {
  await admin.bgrewriteaof().catch(() => {
    // A rewrite already in progress is just as good.
  });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    // A rewrite asked for while another child ran is only scheduled: it would fork mid-run.
    const [running, scheduled] = await Promise.all([
      infoNumber(admin, 'persistence', 'aof_rewrite_in_progress'),
      infoNumber(admin, 'persistence', 'aof_rewrite_scheduled'),
    ]);
    if (running === 0 && scheduled === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Machine load, in cores, under which a run starts at once. */
const QUIET_CORES = 0.3;
/** Longest wait for quiet before one run, and in all: the whole bench must stay under 10 min. */
const QUIET_WAIT_MS = 5_000;
const QUIET_BUDGET_MS = 20_000;

/**
 * The machine may be shared (other test suites, builds): before a run, wait up to
 * {@link QUIET_WAIT_MS} for the load of everything else to drop below {@link QUIET_CORES}, within
 * a total budget. Resolves to the load last seen, in cores. Each run also reports what other
 * programs used while it ran (see `otherShare` in the probes).
 */
function quietGate(): () => Promise<number> {
  let budgetMs = QUIET_BUDGET_MS;
  return async () => {
    const started = Date.now();
    const limitMs = Math.min(QUIET_WAIT_MS, budgetMs);
    let busy: number;
    do {
      const before = machineBusyMs();
      await new Promise((r) => setTimeout(r, 300));
      busy = (machineBusyMs() - before) / 300;
    } while (busy > QUIET_CORES && Date.now() - started < limitMs);
    budgetMs = Math.max(0, budgetMs - (Date.now() - started));
    return busy;
  };
}
