import { availableParallelism } from 'node:os';
import type { CliProcess } from '../test/support/cli.js';
import type { CommandStats, ProbeResult, Watched } from './probes.js';
import { num, pct } from './stats.js';

/**
 * Turns probe readings into the "limited by" evidence of a table: who burnt how much CPU, how
 * busy the bench's event loop was, and which Redis commands did the work.
 */

/** The processes of a run, labelled: Redis, the given role processes, and the bench itself. */
export function watchList(
  redisPid: number,
  roles: readonly { label: string; processes: readonly CliProcess[] }[],
): Watched[] {
  const watched: Watched[] = [{ label: 'redis-server', pid: redisPid }];
  for (const { label, processes } of roles) {
    processes.forEach((p, i) => {
      if (p.child.pid !== undefined) {
        const name = processes.length > 1 ? `${label} ${i + 1}` : label;
        watched.push({ label: name, pid: p.child.pid });
      }
    });
  }
  watched.push({ label: 'bench (simulator + producer)', pid: process.pid });
  return watched;
}

/**
 * One line: each process's CPU as a share of one core, processes with the same label averaged
 * and summed ("worker 4× 45 % (sum 180 %)"), the bench's ELU, and how many cores the bench and
 * everything else on the machine used, so a saturated machine is visible as such.
 */
export function describeCpu(probe: ProbeResult): string {
  const groups = new Map<string, number[]>();
  for (const { label, share } of probe.cpu) {
    const group = label.replace(/ \d+$/, '');
    groups.set(group, [...(groups.get(group) ?? []), share]);
  }
  const parts = [...groups].map(([group, shares]) => {
    if (shares.length === 1) return `${group} ${pct(shares[0] as number)}`;
    const sum = shares.reduce((a, b) => a + b, 0);
    return `${group} ${shares.length}× ${pct(sum / shares.length)} (sum ${pct(sum)})`;
  });
  const total = probe.cpu.reduce((a, c) => a + c.share, 0);
  const cores = availableParallelism();
  return (
    `${verdict(probe)}. CPU (share of one core): ${parts.join(', ')}; bench event loop ` +
    `${pct(probe.benchElu)} busy; bench processes ${num(total, 2)} + other programs ` +
    `${num(probe.otherShare, 2)} of ${cores} cores`
  );
}

/** A process or an event loop busier than this counts as saturated. */
const SATURATED = 0.9;
/**
 * A machine whose cores are this busy counts as CPU-bound: with two cores, runnable processes
 * already queue for a core well before both are 100 % busy.
 */
const MACHINE_BOUND = 0.8;

/**
 * What the counters say limits the period: one process using a whole core, the bench's event
 * loop (simulator and producer) never idle, every core of the machine busy, or none of these
 * (then the limit is latency: round trips, timers, waiting for work).
 */
export function verdict(probe: ProbeResult): string {
  const busiest = [...probe.cpu].sort((a, b) => b.share - a.share)[0];
  const cores = availableParallelism();
  const total = probe.cpu.reduce((a, c) => a + c.share, 0) + probe.otherShare;
  if (busiest && busiest.share >= SATURATED) {
    return `**${busiest.label} is CPU-bound** (${pct(busiest.share)} of a core)`;
  }
  if (probe.benchElu >= SATURATED) {
    return `**the bench's event loop (simulator + producer) is saturated** (${pct(probe.benchElu)})`;
  }
  if (total >= MACHINE_BOUND * cores) {
    const others =
      probe.otherShare >= 0.2 ? `, ${num(probe.otherShare, 2)} of them by other programs` : '';
    return `**the machine is CPU-bound** (${num(total, 2)} of ${cores} cores busy${others})`;
  }
  return `**no process and not the machine is CPU-bound** (busiest: ${busiest?.label ?? '?'} ${pct(busiest?.share ?? 0)}): the limit is latency or waiting`;
}

/** The `n` most-called Redis commands, with calls per `unit` (e.g. per follow-up). */
export function topCommands(stats: CommandStats, per: number, n = 6): string {
  return [...stats]
    .sort((a, b) => b[1].calls - a[1].calls)
    .slice(0, n)
    .map(([name, { calls }]) => `${name} ${num(calls / per, 2)}`)
    .join(', ');
}
