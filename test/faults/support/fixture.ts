import { afterEach, beforeEach } from 'vitest';
import { createProducer, type Producer } from '../../../src/producer/index.js';
import type { Simulator } from '../../../src/simulator/index.js';
import type { CliProcess } from '../../support/cli.js';
import { useNamespace, type Namespace } from '../../support/namespace.js';
import { openProbe, type Probe } from './quiet.js';

/** One test's drill: its namespace, a producer and a probe on its Redis, the processes started. */
export interface Drill {
  readonly ns: Namespace;
  readonly producer: Producer;
  readonly probe: Probe;
  /** Every process the test started; those still running are SIGKILLed after the test. */
  processes: CliProcess[];
}

/** Options of {@link useDrill}. */
export interface DrillOptions {
  /** The Redis of the producer and the probe (a private redis-server); the namespace's if unset. */
  readonly redisUrl?: () => string;
}

/**
 * Gives each test of the file a fresh {@link Drill} and resets the simulator; after the test it
 * kills what is left of the processes, closes the producer and the probe and deletes the
 * namespace. A drill stops its processes itself (and checks how they exited) before its figures;
 * the kill only clears up after a test that failed before that. Hooks run in reverse order after a
 * test, so a fixture the drill depends on (a Redis server) is set up by hooks declared before this
 * call, and a load that uses the producer is stopped by an `afterEach` declared after it.
 */
export function useDrill(
  label: string,
  simulator: () => Simulator,
  options: DrillOptions = {},
): () => Drill {
  const namespace = useNamespace(label, { simulator });
  let drill: Drill | undefined;
  beforeEach(() => {
    const ns = namespace();
    const redisUrl = options.redisUrl?.() ?? ns.redisUrl;
    drill = {
      ns,
      producer: createProducer({ redisUrl, prefix: ns.prefix }),
      probe: openProbe(redisUrl, ns.prefix, ns.eventsStream),
      processes: [],
    };
  });
  afterEach(async () => {
    if (!drill) return;
    const { producer, probe, processes } = drill;
    drill = undefined;
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await producer.close();
    await probe.close();
  });
  return () => {
    if (!drill) throw new Error('useDrill(): the drill exists inside a test');
    return drill;
  };
}
