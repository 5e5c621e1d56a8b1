import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createProducer, type Producer } from '../../src/producer/index.js';
import type { CliProcess } from '../support/cli.js';
import { fleetEnv, startRoles, stopAll } from '../support/fleet.js';
import { createNamespace, eventually, type Namespace } from '../support/namespace.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { useSimulator } from '../support/simulator.js';
import { readCounter, startCanary } from './support/canary.js';
import { expectCleanBooks } from './support/crash-case.js';
import { randomMoment } from './support/drill.js';
import { describeCounts, recordFigures, stopwatch } from './support/figures.js';
import { headline, tally, tallyNotes, type Accepted } from './support/ledger.js';
import { openProbe, waitForRole, type Probe } from './support/quiet.js';
import { SCALE } from './support/scale.js';
import { startSender, type Sender } from './support/sender.js';
import {
  DRILL_SETTINGS,
  isAlive,
  outcomeOf,
  outcomeTypeOf,
  UNLIMITED,
  workTimeMs,
} from './support/traffic.js';

describe('3. Redis restarts', () => {
  const simulator = useSimulator({
    workTimeMs,
    outcome: (_project, _job, prompt) => outcomeOf(prompt),
    sendLimit: UNLIMITED,
  });
  let server: PrivateRedis;
  let ns: Namespace;
  let probe: Probe;
  let producer: Producer;
  let processes: CliProcess[] = [];
  let sender: Sender | undefined;

  beforeEach(async () => {
    server = await startPrivateRedis();
    ns = createNamespace('f-redis');
    probe = openProbe(server.url, ns.prefix, ns.eventsStream);
    producer = createProducer({ redisUrl: server.url, prefix: ns.prefix });
    simulator().reset();
  });
  afterEach(async () => {
    await sender?.stop();
    sender = undefined;
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    processes = [];
    await producer.close();
    await probe.close();
    await server.destroy();
    await ns.cleanup();
  });

  /** Waits until `n` more sends were accepted: the load flows (again). */
  async function flowing(load: Sender, n = 40): Promise<void> {
    const target = load.accepted.length + n;
    await eventually(() => (load.accepted.length >= target ? true : undefined), {
      timeoutMs: 30_000,
      what: `${n} more accepted sends`,
    });
  }

  /** Milliseconds until the producer is accepted again and until the workers deliver again. */
  async function recovery(load: Sender): Promise<[number, number]> {
    const from = Date.now();
    const [sends, deliveries] = [load.accepted.length, simulator().deliveries.length];
    let producerMs: number | undefined;
    let workersMs: number | undefined;
    await eventually(
      () => {
        if (producerMs === undefined && load.accepted.length > sends)
          producerMs = Date.now() - from;
        if (workersMs === undefined && simulator().deliveries.length > deliveries)
          workersMs = Date.now() - from;
        return producerMs !== undefined && workersMs !== undefined ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 10, what: 'sends and deliveries after the restart' },
    );
    return [producerMs ?? 0, workersMs ?? 0];
  }

  it('ends every accepted follow-up once, and roles reconnect by themselves', async (ctx) => {
    const watch = stopwatch();
    const env = fleetEnv(ns, simulator(), { ...DRILL_SETTINGS, REDIS_URL: server.url });
    processes = [...startRoles('worker', 2, env), ...startRoles('poller', 1, env)];
    await waitForRole(probe, 'dispatch', 2);
    const load = startSender(producer, simulator(), SCALE.redis.sendIntervalMs);
    sender = load;
    const restarts: string[] = [];
    const canaryLost: number[] = [];
    let canaryAcked = 0;
    const backMs: [number, number][] = [];
    for (let r = 0; r < SCALE.redis.restarts; r++) {
      await flowing(load);
      const signal = r % 2 === 0 ? 'SIGTERM' : 'SIGKILL';
      const canaryKey = `${ns.prefix}:canary:${r}`;
      const canary = startCanary(server.url, canaryKey);
      await eventually(() => (canary.acked() >= 200 ? true : undefined), { what: 'canary writes' });
      await server.stop(signal);
      const acked = await canary.done;
      const downMs = await randomMoment(300, 1_500);
      await server.restart();
      backMs.push(await recovery(load));
      canaryAcked += acked;
      canaryLost.push(Math.max(0, acked - (await readCounter(server.url, canaryKey))));
      restarts.push(`${signal} ${downMs} ms`);
    }
    await flowing(load);
    await load.stop();

    // A rejected send that Redis had stored after all was enqueued at its first try: the books
    // put it in its lane at that place; the others were enqueued by the retry.
    const storedAnyway: Accepted[] = [];
    const storedByRetry: Accepted[] = [];
    for (const { input } of load.rejected) {
      const result = await producer.send(input);
      (result.deduplicated ? storedAnyway : storedByRetry).push({ ...result, input });
    }
    const round = (a: Accepted) => Number(a.input.prompt.split('#')[1]);
    const accepted = [
      ...[...load.accepted, ...storedAnyway].sort((a, b) => round(a) - round(b)),
      ...storedByRetry,
    ];
    const retried = [...storedAnyway, ...storedByRetry];
    const { events, quiet } = await probe.settle(accepted.length, 120_000);
    const books = tally(accepted, events, simulator().deliveries, outcomeTypeOf);
    const alive = processes.filter((p) => isAlive(p.child)).length;
    const exits = await stopAll(processes);
    processes = [];
    const lostCanary = canaryLost.reduce((a, b) => a + b, 0);
    recordFigures(ctx, {
      category: 3,
      scenario: `a follow-up every ${SCALE.redis.sendIntervalMs} ms (own key each) to 100 agent jobs in 20 projects; 2 workers and 1 poller never restarted; redis-server with AOF, appendfsync everysec`,
      tried: accepted.length,
      faults: `${restarts.length} restarts (${restarts.join(', ')})`,
      lost: headline(books).lost + lostCanary,
      duplicated: headline(books).duplicated,
      leaked: 0,
      notes: [
        ...tallyNotes(books, describeCounts),
        `sends accepted during the drill ${load.accepted.length}; rejected while Redis was down ${load.rejected.length}, slowest send (accepted or rejected) ${load.slowestMs()} ms`,
        `rejected sends retried with the same key after the restart ${retried.length}: ${storedAnyway.length} had been stored despite the error (deduplicated), ${storedByRetry.length} were stored by the retry`,
        `after each restart, first accepted send after ${backMs.map(([p]) => p).join(', ')} ms; first delivery by the (never restarted) workers after ${backMs.map(([, w]) => w).join(', ')} ms`,
        `canary: ${canaryAcked} INCRs acknowledged right up to the kills, ${lostCanary} missing after the restarts (per restart: ${canaryLost.join(', ')})`,
        `settled to an idle namespace: ${quiet}; role processes alive at the end ${alive}/${exits.length} (never restarted), exit codes on SIGTERM: ${[...new Set(exits)].join(', ')}`,
      ],
      durationMs: watch(),
    });

    expect(lostCanary).toBe(0);
    expect(load.slowestMs()).toBeLessThan(5_000);
    expectCleanBooks(books);
    expect(quiet).toBe(true);
    expect(alive).toBe(exits.length);
    expect(exits.every((code) => code === 0)).toBe(true);
  });
});
