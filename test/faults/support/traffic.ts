import type { RunEnding, SimulatorOptions } from '../../../src/simulator/index.js';

/**
 * The traffic of the drills: how the simulated agent ends each run, and the settings that keep a
 * drill quick (short stall detection, short grace, frequent status reads) without changing what
 * the service promises.
 */

const OUTCOMES: readonly RunEnding[] = ['completed', 'completed_no_pr', 'failed', 'archived'];

const EVENT_TYPE: Record<RunEnding, string> = {
  completed: 'followup.completed',
  completed_no_pr: 'followup.completed',
  failed: 'followup.failed',
  archived: 'followup.archived',
};

/** The outcome of the run a prompt `… #n` starts: fixed by `n`, so the books can check events. */
export function outcomeOf(prompt: string): RunEnding {
  return OUTCOMES[Number(prompt.split('#')[1] ?? 0) % OUTCOMES.length] ?? 'completed';
}

/** The event type a prompt's run should end with. */
export function outcomeTypeOf(prompt: string): string {
  return EVENT_TYPE[outcomeOf(prompt)];
}

/** Run times of 300 to 800 ms: long enough for the poller to see most runs `active`. */
export function workTimeMs(): number {
  return 300 + Math.floor(Math.random() * 500);
}

/** A send limit the drills never reach: 429s come only from the faults a drill injects. */
export const UNLIMITED = { max: 1_000_000, windowMs: 1_000 } as const;

/**
 * The simulator of the drills: runs of {@link workTimeMs}, each ending as {@link outcomeOf} its
 * prompt says, no send limit; a drill overrides what it measures.
 */
export const DRILL_SIMULATOR = {
  workTimeMs,
  outcome: (_project: string, _job: string, prompt: string) => outcomeOf(prompt),
  sendLimit: UNLIMITED,
} satisfies Partial<SimulatorOptions>;

/** Settings of every role in a drill (on top of the test fleet's fast settings). */
export const DRILL_SETTINGS: Record<string, string> = {
  SEND_RATE_LIMIT: '100000/1s',
  STALLED_TIMEOUT: '2s',
  ACTIVE_GRACE: '1s',
  POLL_MAX_INTERVAL: '300ms',
  SHUTDOWN_TIMEOUT: '5s',
};

/** Whether a process is still running. */
export function isAlive(child: { exitCode: number | null; signalCode: string | null }): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** How many JSON log lines of these processes carry the message `msg`. */
export function countLogLines(
  processes: readonly { output: { stdout: string } }[],
  msg: string,
): number {
  let n = 0;
  for (const p of processes) {
    for (const line of p.output.stdout.split('\n')) if (line.includes(`"msg":"${msg}"`)) n++;
  }
  return n;
}
