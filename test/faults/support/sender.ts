import type { FollowUpInput } from '../../../src/dispatch/followup.js';
import type { Producer } from '../../../src/producer/index.js';
import type { Simulator } from '../../../src/simulator/index.js';
import type { Accepted } from './ledger.js';

/** A send that `send` rejected: not accepted, so it must be retried with the same key. */
export interface Rejected {
  readonly input: FollowUpInput;
  readonly ms: number;
  readonly error: string;
}

/** A steady stream of sends, each with its own idempotency key, recording every answer. */
export interface Sender {
  readonly accepted: Accepted[];
  readonly rejected: Rejected[];
  /** Longest time a send took to resolve or reject. */
  readonly slowestMs: () => number;
  /** Stops after the send in flight. */
  stop(): Promise<void>;
}

/**
 * Sends one follow-up every `intervalMs` (the pacing of the load, not a wait for anything) to
 * `projects` x 5 agent jobs, seeded in the simulator, round-robin, so each agent job gets a new
 * follow-up every `projects * 5` sends.
 */
export function startSender(
  producer: Producer,
  simulator: Simulator,
  intervalMs: number,
  projects = 20,
): Sender {
  for (let p = 0; p < projects; p++)
    for (let j = 0; j < 5; j++) simulator.seedJob(`r${p}`, `j${j}`);
  const accepted: Accepted[] = [];
  const rejected: Rejected[] = [];
  let slowest = 0;
  let stopped = false;
  const loop = (async () => {
    for (let i = 1; !stopped; i++) {
      const input: FollowUpInput = {
        projectId: `r${i % projects}`,
        jobId: `j${Math.floor(i / projects) % 5}`,
        prompt: `redis drill #${i}`,
        key: `rk-${i}`,
      };
      const started = performance.now();
      try {
        const { dispatchId } = await producer.send(input);
        accepted.push({ dispatchId, input, at: Date.now() });
      } catch (err) {
        const ms = performance.now() - started;
        rejected.push({ input, ms, error: err instanceof Error ? err.message : String(err) });
      }
      slowest = Math.max(slowest, performance.now() - started);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    accepted,
    rejected,
    slowestMs: () => Math.round(slowest),
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
