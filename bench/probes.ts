import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import type { Redis } from 'ioredis';

/**
 * Counters that show what limits a run, read before and after it: CPU time of every process
 * (from /proc, so child processes cost nothing to observe), the bench process's event-loop
 * utilization, and Redis's per-command statistics.
 */

/** Clock ticks per second of /proc's utime and stime; 100 on every common Linux build. */
const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system) a process has used so far, in ms; 0 once it is gone. */
export function cpuMsOf(pid: number): number {
  if (pid === process.pid) {
    const usage = process.cpuUsage();
    return (usage.user + usage.system) / 1000;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * CPU time the whole machine has spent busy so far, in ms summed over cores: user, nice, system,
 * irq, softirq and steal from /proc/stat. Against the bench's own processes it shows how much of
 * the machine other programs took during a run (this machine may be shared).
 */
export function machineBusyMs(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    const [user, nice, system, , , irq, softirq, steal] = line
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    const ticks = [user, nice, system, irq, softirq, steal].reduce<number>(
      (a, b) => a + (b ?? 0),
      0,
    );
    return (ticks * 1000) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/** Resident set size now and at its peak, in bytes (VmRSS, VmHWM). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1]);
  return { rss: kib('VmRSS') * 1024, peak: kib('VmHWM') * 1024 };
}

/** Calls and time of each Redis command, from INFO commandstats (commands run by scripts too). */
export type CommandStats = Map<string, { calls: number; usec: number }>;

/** Reads INFO commandstats. */
export async function commandStats(redis: Redis): Promise<CommandStats> {
  const text = await redis.info('commandstats');
  const stats: CommandStats = new Map();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    stats.set(match[1] as string, { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return stats;
}

/** What happened between two commandstats readings; commands with no new calls are left out. */
export function commandDelta(before: CommandStats, after: CommandStats): CommandStats {
  const delta: CommandStats = new Map();
  for (const [name, now] of after) {
    const was = before.get(name) ?? { calls: 0, usec: 0 };
    if (now.calls > was.calls) {
      delta.set(name, { calls: now.calls - was.calls, usec: now.usec - was.usec });
    }
  }
  return delta;
}

/** Total calls in a commandstats delta. */
export function totalCalls(stats: CommandStats): number {
  let total = 0;
  for (const { calls } of stats.values()) total += calls;
  return total;
}

/** One field of an INFO section, as a number. */
export async function infoNumber(redis: Redis, section: string, field: string): Promise<number> {
  const text = await redis.info(section);
  return Number(new RegExp(`^${field}:(\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
}

/** What `key` weighs in Redis: MEMORY USAGE with every element counted (0 when missing). */
export async function keyBytes(redis: Redis, key: string): Promise<number> {
  return Number(await redis.memory('USAGE', key, 'SAMPLES', 0)) || 0;
}

/** The encoding Redis keeps `key` in (listpack, hashtable, ...). */
export async function keyEncoding(redis: Redis, key: string): Promise<string> {
  return String(await redis.object('ENCODING', key));
}

/** A labelled process whose CPU a {@link Probe} watches. */
export interface Watched {
  readonly label: string;
  readonly pid: number;
}

/** What a probe saw over one measured period. */
export interface ProbeResult {
  readonly wallMs: number;
  /** CPU used by each watched process, as a share of one core (1 = a whole core). */
  readonly cpu: readonly { label: string; share: number; cpuMs: number }[];
  /** Event-loop utilization of the bench process (simulator, producer, probes). */
  readonly benchElu: number;
  /** CPU other programs used meanwhile, as a share of one core (machine busy minus watched). */
  readonly otherShare: number;
  readonly commands: CommandStats;
  /**
   * Socket reads Redis served (INFO stats `total_reads_processed`): about one per round trip of
   * a client, however many commands it carries. The probe's own INFO reads are left out, and
   * by {@link probeWork} the bench's own commands too.
   */
  readonly reads: number;
}

/** Starts measuring; `stop()` returns what changed since. */
export async function startProbe(
  redis: Redis,
  watched: readonly Watched[],
): Promise<{ stop(): Promise<ProbeResult> }> {
  const readsBefore = await infoNumber(redis, 'stats', 'total_reads_processed');
  const commandsBefore = await commandStats(redis);
  const cpuBefore = watched.map((w) => cpuMsOf(w.pid));
  const machineBefore = machineBusyMs();
  const eluBefore: EventLoopUtilization = performance.eventLoopUtilization();
  const started = performance.now();
  return {
    async stop() {
      const wallMs = performance.now() - started;
      const cpu = watched.map((w, i) => {
        const cpuMs = cpuMsOf(w.pid) - (cpuBefore[i] as number);
        return { label: w.label, cpuMs, share: cpuMs / wallMs };
      });
      const watchedMs = cpu.reduce((sum, c) => sum + c.cpuMs, 0);
      const otherShare = Math.max(0, machineBusyMs() - machineBefore - watchedMs) / wallMs;
      const benchElu = performance.eventLoopUtilization(eluBefore).utilization;
      const commands = commandDelta(commandsBefore, await commandStats(redis));
      // The probe's own INFO reads after the first one: commandstats twice, then this one.
      const reads = (await infoNumber(redis, 'stats', 'total_reads_processed')) - readsBefore - 3;
      return { wallMs, cpu, benchElu, otherShare, commands, reads };
    },
  };
}

/** What the bench itself sends to the measured server: its progress XLENs and INFO reads. */
const BENCH_OWN_COMMANDS = ['xlen', 'info'];

/** A probe of `watched` over `work`, without the bench's own commands (see BENCH_OWN_COMMANDS). */
export async function probeWork(
  redis: Redis,
  watched: readonly Watched[],
  work: () => Promise<unknown>,
): Promise<ProbeResult> {
  const probe = await startProbe(redis, watched);
  await work();
  const result = await probe.stop();
  let reads = result.reads;
  for (const own of BENCH_OWN_COMMANDS) {
    // One at a time: a round trip each.
    reads -= result.commands.get(own)?.calls ?? 0;
    result.commands.delete(own);
  }
  return { ...result, reads };
}

/**
 * How late a BZPOPMIN on an empty key returns after its timeout, in ms, `samples` times with
 * timeouts of 20 to 120 ms: the precision of BullMQ's wake-ups of delayed jobs, which an idle
 * Redis checks only `hz` times a second. Uses its own connection (BZPOPMIN blocks it).
 */
export async function blockingLatenessMs(redis: Redis, samples = 15): Promise<number[]> {
  const client = redis.duplicate();
  try {
    const late: number[] = [];
    for (let i = 0; i < samples; i++) {
      const timeoutMs = 20 + Math.round(Math.random() * 100);
      const started = performance.now();
      await client.bzpopmin(`bench:no-such-key:${i}`, timeoutMs / 1000);
      late.push(performance.now() - started - timeoutMs);
    }
    return late;
  } finally {
    client.disconnect();
  }
}
