import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import type { Producer } from '../../src/producer/index.js';
import type { Simulator } from '../../src/simulator/index.js';
import type { CliProcess } from './cli.js';
import { duplicates } from './events.js';
import { eventually } from './namespace.js';
import { startRoles } from './roles.js';

/**
 * A failover drill: role processes (never restarted) send follow-ups while a Redis primary is
 * SIGKILLed and its replica promoted, `kills` times; then every follow-up must end in exactly one
 * event, and no prompt may reach the API twice. Shared by the cluster and Sentinel tests and the
 * fault suite; it imports nothing from Vitest, and asserts nothing: the caller judges the result.
 */

/** What a drill needs: the fleet's role environment, a producer, and the way to kill a primary. */
export interface FailoverDrillOptions {
  readonly env: Record<string, string>;
  readonly workers: number;
  readonly pollers: number;
  /** Processes to stop after the test; the drill adds its roles here. */
  readonly processes: CliProcess[];
  readonly producer: Producer;
  readonly simulator: Simulator;
  /** The follow-ups, each with `meta.prompt` set to its prompt, in enqueue order. */
  readonly inputs: readonly FollowUpInput[];
  readonly kills: number;
  /** Waits until the roles' BullMQ workers are connected. */
  waitForRoles(): Promise<void>;
  /** Kills a primary and waits until its replica serves in its place; resolves with the ms. */
  kill(k: number): Promise<number>;
  /** The events so far that carry `meta.prompt`, with that prompt. */
  promptEvents(): Promise<{ dispatchId: string; prompt: string }[]>;
  /** How long the last wave may take to end. @defaultValue 120000 */
  readonly settleMs?: number;
}

/** What a drill did. */
export interface FailoverResult {
  readonly enqueued: number;
  /** Prompts the producer still refused after a minute of retries (never accepted). */
  readonly refused: string[];
  /** Why each refused wave was refused: `wave N: <the producer's last error>`. */
  readonly refusedBecause: string[];
  /** Accepted prompts with no event by the deadline. */
  readonly lost: string[];
  /** Prompts with more than one event. */
  readonly duplicateEvents: string[];
  /** Prompts the simulator received more than once. */
  readonly duplicateSends: string[];
  /** The dispatch id of each accepted prompt. */
  readonly dispatchIds: ReadonlyMap<string, string>;
  /** Prompts with no event that the simulator had received. */
  readonly lostAfterSend: string[];
  /** Milliseconds from each kill to the replica serving. */
  readonly failoverMs: number[];
  /** The roles' output, for the caller's checks. */
  readonly logs: string;
}

/**
 * Runs the drill: starts the roles, sends the follow-ups in `kills + 1` waves, and kills a primary
 * after each wave but the last, once part of that wave has ended (the kill lands in live traffic).
 */
export async function failoverDrill(o: FailoverDrillOptions): Promise<FailoverResult> {
  const roles = [
    ...startRoles('worker', o.workers, o.env),
    ...startRoles('poller', o.pollers, o.env),
  ];
  o.processes.push(...roles);
  const logs = drillLogs(roles);
  try {
    return await drill(o, roles, logs.note);
  } finally {
    logs.write();
  }
}

/** The drill itself, once its roles are started; `note` records a step in the drill's log. */
async function drill(
  o: FailoverDrillOptions,
  roles: readonly CliProcess[],
  note: (line: string) => void,
): Promise<FailoverResult> {
  await o.waitForRoles();
  const waves = o.kills + 1;
  const size = Math.ceil(o.inputs.length / waves);
  const failoverMs: number[] = [];
  const refused: string[] = [];
  const refusedBecause: string[] = [];
  const dispatchIds = new Map<string, string>();
  for (let w = 0; w < waves; w++) {
    const wave = o.inputs.slice(w * size, (w + 1) * size);
    const results = wave.length > 0 ? await sendWithRetry(o.producer, wave) : [];
    if (results instanceof Error) {
      refused.push(...wave.map((i) => i.prompt));
      refusedBecause.push(`wave ${w + 1}: ${results.message}`);
      note(`wave ${w + 1} refused: ${results.message}`);
    } else wave.forEach((i, k) => dispatchIds.set(i.prompt, results[k]?.dispatchId ?? ''));
    if (w === waves - 1) break;
    const target = (await o.promptEvents()).length + Math.ceil(wave.length / 4);
    await eventually(async () => ((await o.promptEvents()).length >= target ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 100,
      what: `a quarter of wave ${w + 1} ended before kill ${w + 1}`,
    });
    note(`kill ${w + 1}`);
    failoverMs.push(await o.kill(w));
    note(`kill ${w + 1}: replica serving after ${failoverMs.at(-1)} ms`);
  }
  const prompts = o.inputs.map((i) => i.prompt).filter((p) => !refused.includes(p));
  const events = await eventually(
    async () => {
      const all = await o.promptEvents();
      const ended = new Set(all.map((e) => e.prompt));
      return prompts.every((p) => ended.has(p)) ? all : undefined;
    },
    { timeoutMs: o.settleMs ?? 120_000, intervalMs: 250, what: 'an event for every follow-up' },
  ).catch(() => o.promptEvents());
  const ended = new Set(events.map((e) => e.prompt));
  const sent = o.simulator.deliveries.map((d) => d.prompt);
  const lost = prompts.filter((p) => !ended.has(p));
  return {
    enqueued: prompts.length,
    refused,
    refusedBecause,
    dispatchIds,
    lost,
    duplicateEvents: duplicates(events.map((e) => e.prompt)),
    duplicateSends: duplicates(sent),
    lostAfterSend: lost.filter((p) => sent.includes(p)),
    failoverMs,
    logs: roles.map((r) => r.output.stdout + r.output.stderr).join('\n'),
  };
}

/**
 * Sends a wave; a batch refused while a primary is away (the producer fails fast) is sent again
 * with the same keys, so what was stored is not stored twice. When it is never accepted, the
 * producer's last error.
 */
async function sendWithRetry(
  producer: Producer,
  wave: readonly FollowUpInput[],
): Promise<{ dispatchId: string }[] | Error> {
  const keyed = wave.map((i) => ({ ...i, key: i.key ?? i.prompt }));
  return eventually(() => producer.sendMany(keyed), {
    timeoutMs: 30_000,
    intervalMs: 250,
    what: 'the wave accepted',
  }).catch((err: unknown) => {
    const last = err instanceof Error && err.cause instanceof Error ? err.cause : err;
    return last instanceof Error ? last : new Error(String(last));
  });
}

/**
 * With `DRILL_LOG_DIR` set, the drill's own log (`drill.log`: each kill, each refused wave, with
 * the time) and each role's output (`worker-0.log`, ...) go to that folder when the drill ends,
 * however it ends: what to read when a drill stalls (raise `LOG_LEVEL` with `DRILL_LOG_LEVEL`).
 */
function drillLogs(roles: readonly CliProcess[]): { note(line: string): void; write(): void } {
  const dir = process.env['DRILL_LOG_DIR'];
  if (!dir) return { note: () => {}, write: () => {} };
  mkdirSync(dir, { recursive: true });
  return {
    note: (line) => appendFileSync(join(dir, 'drill.log'), `${new Date().toISOString()} ${line}\n`),
    write() {
      const seen = new Map<string, number>();
      for (const role of roles) {
        const command = role.child.spawnargs.at(-1) ?? 'role';
        const n = seen.get(command) ?? 0;
        seen.set(command, n + 1);
        writeFileSync(join(dir, `${command}-${n}.log`), role.output.stdout + role.output.stderr);
      }
    },
  };
}

/**
 * `projects` x `jobs` x `rounds` follow-ups, round n of every agent job before round n + 1, each
 * with `meta.prompt`; seeds the agent jobs in `simulator`.
 */
export function drillInputs(
  simulator: Simulator,
  projects: readonly string[],
  jobs: number,
  rounds: number,
): FollowUpInput[] {
  for (const p of projects) for (let j = 0; j < jobs; j++) simulator.seedJob(p, `j${j}`);
  const inputs: FollowUpInput[] = [];
  for (let n = 1; n <= rounds; n++)
    for (const p of projects)
      for (let j = 0; j < jobs; j++) {
        const prompt = `${p}/j${j} #${n}`;
        inputs.push({ projectId: p, jobId: `j${j}`, prompt, meta: { prompt } });
      }
  return inputs;
}
