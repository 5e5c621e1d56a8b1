import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keysFor } from '../../src/redis/keys.js';
import { fleetEnv } from '../support/fleet.js';
import { eventually } from '../support/namespace.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { startRoles, terminate, uncleanExits } from '../support/roles.js';
import { useSimulator } from '../support/simulator.js';
import { expectCleanBooks } from './support/crash-case.js';
import { describeCounts, recordFigures, stopwatch } from './support/figures.js';
import { useDrill } from './support/fixture.js';
import { headline, tally, tallyNotes, type Accepted } from './support/ledger.js';
import { waitForRole } from './support/quiet.js';
import { restartRedis, unexplained, type Restart } from './support/restarts.js';
import { SCALE } from './support/scale.js';
import { startSender, type Sender } from './support/sender.js';
import { DRILL_SETTINGS, DRILL_SIMULATOR, isAlive, outcomeTypeOf } from './support/traffic.js';

describe('3. Redis restarts', () => {
  const simulator = useSimulator(DRILL_SIMULATOR);
  let server: PrivateRedis;
  beforeEach(async () => {
    server = await startPrivateRedis();
  });
  // After hooks run in reverse: the sender stops first, the server goes last.
  afterEach(() => server.destroy());
  const drill = useDrill('f-redis', simulator, { redisUrl: () => server.url });
  let sender: Sender | undefined;
  afterEach(async () => {
    await sender?.stop();
    sender = undefined;
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
    const { ns, producer, probe } = drill();
    const env = fleetEnv(ns, simulator(), { ...DRILL_SETTINGS, REDIS_URL: server.url });
    const processes = [...startRoles('worker', 2, env), ...startRoles('poller', 1, env)];
    drill().processes = processes;
    await waitForRole(probe, 'dispatch', 2);
    const load = startSender(producer, simulator(), SCALE.redis.sendIntervalMs);
    sender = load;
    const restarts: Restart[] = [];
    const backMs: [number, number][] = [];
    for (let r = 0; r < SCALE.redis.restarts; r++) {
      const signal = r % 2 === 0 ? 'SIGTERM' : 'SIGKILL';
      restarts.push(
        await restartRedis(server, signal, `${ns.prefix}:canary:${r}`, () => flowing(load)),
      );
      backMs.push(await recovery(load));
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
    // A follow-up whose record a restart lost can never end: settle on the others.
    const exists = await Promise.all(
      accepted.map((a) => probe.redis.exists(keysFor(ns.prefix).dispatch(a.dispatchId))),
    );
    const gone = exists.filter((n) => n === 0).length;
    const { events, quiet } = await probe.settle(accepted.length - gone, 120_000);
    const books = tally(accepted, events, simulator().deliveries, outcomeTypeOf);
    const beyond = unexplained(restarts, books, accepted, simulator().deliveries);
    const alive = processes.filter((p) => isAlive(p.child)).length;
    const exits = await terminate(processes);
    const unclean = uncleanExits(processes, exits);
    const lossy = restarts.filter((r) => r.lost > 0);
    recordFigures(ctx, {
      category: 3,
      scenario: `a follow-up every ${SCALE.redis.sendIntervalMs} ms (own key each) to 100 agent jobs in 20 projects; 2 workers and 1 poller never restarted; redis-server with AOF, appendfsync everysec`,
      tried: accepted.length,
      faults: `${restarts.length} restarts (${restarts.map((r) => `${r.signal} ${r.downMs} ms`).join(', ')})`,
      ...headline(books),
      leaked: 0,
      notes: [
        ...tallyNotes(books, describeCounts),
        `sends accepted during the drill ${load.accepted.length}; rejected while Redis was down ${load.rejected.length}, slowest send (accepted or rejected) ${load.slowestMs()} ms`,
        `rejected sends retried with the same key after the restart ${retried.length}: ${storedAnyway.length} had been stored despite the error (deduplicated), ${storedByRetry.length} were stored by the retry`,
        `after each restart, first accepted send after ${backMs.map(([p]) => p).join(', ')} ms; first delivery by the (never restarted) workers after ${backMs.map(([, w]) => w).join(', ')} ms`,
        ...restarts.map(
          (r, i) =>
            `restart ${i + 1}, ${r.signal}: the canary's ${r.acked} acknowledged INCRs, ${r.lost} lost${r.lost > 0 ? `, all acknowledged in the last ${r.killedAt - r.windowStart} ms before the kill` : ''}; just before the stop an fsync was ${r.fsyncPending === '0' ? 'not ' : ''}pending (aof_pending_bio_fsync ${r.fsyncPending}, aof_buffer_length ${r.aofBuffer})`,
        ),
        lossy.length === 0
          ? 'no restart lost an acknowledged write'
          : `acknowledged writes lost by ${lossy.length} SIGKILL restart(s): follow-ups lost ${books.lost.length} (${beyond.lost.length} outside the loss window), prompts delivered twice ${books.duplicateDeliveries.length} (${beyond.duplicated.length} outside it), order violations ${books.orderViolations.length} (${beyond.order.length} outside it)`,
        `settled to an idle namespace: ${quiet}; role processes alive at the end ${alive}/${exits.length} (never restarted), exit codes on SIGTERM: ${[...new Set(exits)].join(', ')}`,
      ],
      durationMs: watch(),
    });

    // SIGTERM flushes and fsyncs the AOF; a SIGKILL loses at most what Redis had postponed while an
    // fsync was running: writes acknowledged within the last 2 (by its 1-second clock, < 3) s.
    for (const r of restarts) {
      if (r.signal === 'SIGTERM') expect(r.lost).toBe(0);
      else expect(r.killedAt - r.windowStart).toBeLessThan(3_100);
    }
    expect(load.slowestMs()).toBeLessThan(5_000);
    expect(beyond).toEqual({ lost: [], duplicated: [], order: [] });
    expect(books.duplicateEvents).toEqual([]);
    expect(books.phantomEvents).toEqual([]);
    expect(books.outcomesWithoutDelivery).toEqual([]);
    expect(books.wrongOutcomes).toEqual([]);
    if (lossy.length === 0) expectCleanBooks(books);
    expect(quiet).toBe(true);
    expect(alive).toBe(exits.length);
    expect(unclean).toEqual([]);
  });
});
