import type { Faults, Simulator } from '../../../src/simulator/index.js';

/**
 * Category 4's faults. Rates hold for the whole drill; every tick the chaos changes what cannot
 * be a rate (slow bodies, slow answers, the shape of 429s) and now and then forces a burst of 429s
 * on one project, with or without Retry-After, as JSON or as plain text.
 */
export const API_FAULTS: Partial<Faults> = {
  serverErrorRate: 0.3,
  timeoutRate: 0.1,
  resetRate: 0.05,
  malformedJsonRate: 0.05,
  htmlErrorRate: 0.05,
  unknownStatusRate: 0.1,
  latencyMs: [0, 30],
};

/** What the chaos did, for the report. */
export interface ChaosLog {
  ticks: number;
  bursts: number;
  burstsWithRetryAfter: number;
  burstsPlainText: number;
  /** Ticks with answers slower than `SEND_TIMEOUT` (sends abandoned before they are processed). */
  slowTicks: number;
  /** Ticks whose 200 bodies came in two chunks, 300 ms or 1.5 s apart. */
  slowBodyTicks: number;
}

/** Starts changing `simulator`'s faults every `tickMs` for projects `projects`; stop() restores calm. */
export function startChaos(
  simulator: Simulator,
  projects: readonly string[],
  tickMs = 500,
): { log: ChaosLog; stop(): void } {
  const log: ChaosLog = {
    ticks: 0,
    bursts: 0,
    burstsWithRetryAfter: 0,
    burstsPlainText: 0,
    slowTicks: 0,
    slowBodyTicks: 0,
  };
  const coin = (p: number) => Math.random() < p;
  simulator.setFaults(API_FAULTS);
  const timer = setInterval(() => {
    log.ticks++;
    const slow = coin(0.15);
    const slowBodyMs = coin(0.3) ? (coin(0.5) ? 300 : 1_500) : 0;
    if (slow) log.slowTicks++;
    if (slowBodyMs > 0) log.slowBodyTicks++;
    simulator.setFaults({
      latencyMs: slow ? [700, 1_400] : [0, 30],
      slowBodyMs,
      plainText429: coin(0.5),
      retryAfter: coin(0.5),
    });
    if (coin(0.3)) {
      const project = projects[Math.floor(Math.random() * projects.length)] ?? '';
      const retryAfter = coin(0.5);
      const plainText = coin(0.5);
      simulator.rateLimitProject(project, Date.now() + 500 + Math.random() * 2_500, {
        retryAfter,
        plainText,
      });
      log.bursts++;
      if (retryAfter) log.burstsWithRetryAfter++;
      if (plainText) log.burstsPlainText++;
    }
  }, tickMs);
  // A drill that fails before stop() must not keep the test process alive.
  timer.unref();
  return {
    log,
    stop() {
      clearInterval(timer);
      simulator.setFaults({
        ...Object.fromEntries(Object.keys(API_FAULTS).map((k) => [k, 0])),
        latencyMs: 0,
        slowBodyMs: 0,
      });
    },
  };
}

/** Requests by the fault injected (and 429s, and sends abandoned before they were processed). */
export function faultCounts(simulator: Simulator): Record<string, number> {
  const counts: Record<string, number> = {};
  const add = (name: string) => (counts[name] = (counts[name] ?? 0) + 1);
  for (const r of simulator.requests) {
    if (r.fault) add(`${r.kind} ${r.fault}`);
    else if (r.status === 429) add(`${r.kind} 429`);
    else if (r.status === 0 && !r.processed) add(`${r.kind} abandoned by the client`);
  }
  return counts;
}
