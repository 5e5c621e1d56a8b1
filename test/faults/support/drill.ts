import type { FollowUpInput } from '../../../src/dispatch/followup.js';
import type { Producer } from '../../../src/producer/index.js';
import { runCli, type CliProcess } from '../../support/cli.js';
import type { Accepted } from './ledger.js';
import { waitForRole, type Probe } from './quiet.js';

/** A crash drill: processes of one role SIGKILLed at random moments under load, and restarted. */
export interface CrashDrillOptions {
  readonly role: 'worker' | 'poller';
  /** Processes of the role kept running; each kill hits one of them at random. */
  readonly count: number;
  readonly kills: number;
  readonly env: Record<string, string>;
  readonly probe: Probe;
  readonly producer: Producer;
  /** Enqueued in `kills` waves, one before each kill, so every kill lands in live traffic. */
  readonly inputs: readonly FollowUpInput[];
}

/** What a crash drill did. `running` are the role's processes alive at the end. */
export interface CrashDrillResult {
  readonly accepted: Accepted[];
  readonly running: CliProcess[];
  /** Every process the drill killed, with its output (for the secrets scan). */
  readonly killed: CliProcess[];
  /** Milliseconds from each wave's enqueue to its kill. */
  readonly killDelaysMs: number[];
}

/** Waits a random time: the only fixed sleep of the drills, to pick the moment of a fault. */
export function randomMoment(minMs: number, maxMs: number): Promise<number> {
  const ms = Math.round(minMs + Math.random() * (maxMs - minMs));
  return new Promise((resolve) => setTimeout(() => resolve(ms), ms));
}

/** Runs the drill; the caller settles the books and stops `running`. */
export async function crashDrill(o: CrashDrillOptions): Promise<CrashDrillResult> {
  const queue = o.role === 'worker' ? 'dispatch' : 'poll';
  const running = Array.from({ length: o.count }, () => runCli([o.role], o.env));
  const killed: CliProcess[] = [];
  const accepted: Accepted[] = [];
  const killDelaysMs: number[] = [];
  try {
    await waitForRole(o.probe, queue, o.count);
    const waveSize = Math.ceil(o.inputs.length / o.kills);
    for (let k = 0; k < o.kills; k++) {
      const wave = o.inputs.slice(k * waveSize, (k + 1) * waveSize);
      if (wave.length > 0) {
        const results = await o.producer.sendMany(wave);
        accepted.push(
          ...results.map((r, i) => ({ dispatchId: r.dispatchId, input: wave[i] as FollowUpInput })),
        );
      }
      killDelaysMs.push(await randomMoment(100, 1_000));
      const victim = Math.floor(Math.random() * running.length);
      const proc = running[victim] as CliProcess;
      const signal = await proc.stop('SIGKILL');
      if (signal !== 'SIGKILL')
        throw new Error(`the ${o.role} had exited before its kill: ${signal}`);
      killed.push(proc);
      running[victim] = runCli([o.role], o.env);
      await waitForRole(o.probe, queue, o.count);
    }
  } catch (err) {
    await Promise.all(running.map((p) => p.stop('SIGKILL')));
    throw err;
  }
  return { accepted, running, killed, killDelaysMs };
}
