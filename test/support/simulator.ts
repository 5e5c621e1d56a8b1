import { afterAll, beforeAll } from 'vitest';
import {
  startSimulator,
  type Simulator,
  type SimulatorOptions,
} from '../../src/simulator/index.js';

/** The bearer key test simulators accept; tests pass it to the client or the service. */
export const TEST_API_KEY = 'sim-test-key-0123456789';

/** Starts a simulator on a free loopback port with {@link TEST_API_KEY}; close it when done. */
export function startTestSimulator(options: Partial<SimulatorOptions> = {}): Promise<Simulator> {
  return startSimulator({ apiKey: TEST_API_KEY, port: 0, host: '127.0.0.1', ...options });
}

/**
 * One simulator for the whole file: started before the first test, closed after the last (which
 * also destroys hung sockets and clears job timers). Returns a getter, since the simulator exists
 * only once `beforeAll` ran. Call `reset()` in a `beforeEach` if tests must not see each other's
 * records.
 */
export function useSimulator(options: Partial<SimulatorOptions> = {}): () => Simulator {
  let simulator: Simulator | undefined;
  beforeAll(async () => {
    simulator = await startTestSimulator(options);
  });
  afterAll(async () => {
    await simulator?.close();
  });
  return () => {
    if (!simulator) throw new Error('useSimulator(): the simulator starts in beforeAll');
    return simulator;
  };
}
