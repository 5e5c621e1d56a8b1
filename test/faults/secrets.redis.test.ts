import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FollowUpInput } from '../../src/dispatch/followup.js';
import { logLines, runCli, type CliProcess } from '../support/cli.js';
import { fleetEnv, grid } from '../support/fleet.js';
import { useOpened } from '../support/hooks.js';
import { eventually } from '../support/namespace.js';
import { startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { useSimulator } from '../support/simulator.js';
import { startChaos } from './support/chaos.js';
import { randomMoment } from './support/drill.js';
import { startEchoProxy } from './support/echo-proxy.js';
import { describeCounts, recordFigures, stopwatch } from './support/figures.js';
import { post } from './support/intake.js';
import { headline, tally, type Accepted } from './support/ledger.js';
import { useDrill } from './support/fixture.js';
import { waitForRole } from './support/quiet.js';
import { SCALE } from './support/scale.js';
import { addDashboard, addPage, addRedis, Haystack } from './support/secrets.js';
import { DRILL_SETTINGS, isAlive, outcomeOf, UNLIMITED, workTimeMs } from './support/traffic.js';

const hex = () => randomBytes(12).toString('hex');
const KEY = `sk-live-${hex()}`;
const INTAKE_TOKEN = `intake-${hex()}`;
const DASHBOARD_TOKEN = `dashboard-${hex()}`;

describe('7. the key stays secret', () => {
  const simulator = useSimulator({
    apiKey: KEY,
    workTimeMs,
    outcome: (_p, _j, prompt) => outcomeOf(prompt),
    sendLimit: UNLIMITED,
  });
  let server: PrivateRedis;
  beforeEach(async () => {
    server = await startPrivateRedis();
  });
  afterEach(() => server.destroy());
  const proxy = useOpened('echo proxy', () => startEchoProxy(simulator().url, 0.1));
  const drill = useDrill('f-secret', simulator, { redisUrl: () => server.url });

  it('never shows the API key (nor the intake and dashboard tokens) in logs, Redis, pages or errors', async (ctx) => {
    const watch = stopwatch();
    const { ns, producer, probe } = drill();
    const everyone: { name: string; proc: CliProcess }[] = [];
    const env = fleetEnv(ns, simulator(), {
      ...DRILL_SETTINGS,
      REDIS_URL: server.url,
      AGENT_API_URL: proxy().url,
      AGENT_API_KEY: KEY,
      INTAKE_TOKEN,
      DASHBOARD_TOKEN,
      LOG_LEVEL: 'debug',
      HTTP_PORT: '0',
      SEND_TIMEOUT: '1s',
      SEND_ATTEMPTS: '4',
    });
    const launch = (name: string, args: string[]) => {
      const proc = runCli(args, env);
      everyone.push({ name, proc });
      drill().processes.push(proc);
      return proc;
    };
    const workers = [launch('worker 1', ['worker']), launch('worker 2', ['worker'])];
    launch('poller', ['poller']);
    const serve = launch('serve', ['serve']);
    const start = launch('start', ['start']);
    const serveUrl = await eventually(
      () =>
        logLines(serve.output.stdout).find((l) => l['msg'] === 'http:listening')?.['url'] as
          string | undefined,
      { timeoutMs: 30_000, what: 'serve to listen' },
    );
    const startUrl = await eventually(
      () => /follow-ups page: (http:\/\/[^/\s]+)\/dashboard/.exec(start.output.stderr)?.[1],
      {
        timeoutMs: 30_000,
        what: 'start to listen',
      },
    );
    await waitForRole(probe, 'dispatch', 3);
    const chaos = startChaos(
      simulator(),
      Array.from({ length: 10 }, (_, p) => `s${p}`),
    );
    const errors: string[] = [];
    const accepted: Accepted[] = [];
    // Keys make every retry below safe: Redis restarts under the senders.
    const inputs = grid(simulator(), 10, 2, Math.ceil(SCALE.secrets.followUps / 20), 's').map(
      (input, i) => ({ ...input, key: `secret-drill-${i}` }),
    );
    const retrying = <T>(call: () => Promise<T>) =>
      eventually(call, { timeoutMs: 30_000, what: 'Redis to take the follow-ups' });
    const viaProducer = async (batch: FollowUpInput[]) => {
      const results = await retrying(() => producer.sendMany(batch));
      accepted.push(
        ...results.map((r, i) => ({ dispatchId: r.dispatchId, input: batch[i] as FollowUpInput })),
      );
    };
    const viaIntake = async (url: string, batch: FollowUpInput[]) => {
      const reply = await retrying(async () => {
        const answer = await post(url, INTAKE_TOKEN, JSON.stringify(batch));
        if (answer.status === 202) return answer;
        errors.push(JSON.stringify(answer.body));
        throw new Error(`intake answered ${answer.status}`);
      });
      const results = (reply.body['results'] ?? []) as { dispatchId: string }[];
      accepted.push(
        ...results.map((r, i) => ({ dispatchId: r.dispatchId, input: batch[i] as FollowUpInput })),
      );
    };
    const quarter = Math.ceil(inputs.length / 4);
    await viaProducer(inputs.slice(0, quarter));
    await viaIntake(serveUrl, inputs.slice(quarter, 2 * quarter));
    for (const [url, token, body] of [
      [serveUrl, INTAKE_TOKEN, '{"projectId": "p", "jobId": 7, "prompt": ""}'],
      [startUrl, 'wrong-token', '{}'],
      [startUrl, INTAKE_TOKEN, '{"prompt": '],
    ] as const)
      errors.push(JSON.stringify((await post(url, token, body)).body));

    // A worker dies, then Redis: every role must reconnect, and nothing it says may carry a secret.
    await randomMoment(200, 1_000);
    await workers[0]?.stop('SIGKILL');
    launch('worker 1 (restarted)', ['worker']);
    await server.stop('SIGKILL');
    await producer
      .send({ projectId: 's0', jobId: 'j0', prompt: 'during the outage' })
      .catch((err: unknown) => {
        errors.push(
          err instanceof Error ? `${err.message} ${String(err.cause ?? '')}` : String(err),
        );
      });
    errors.push(
      JSON.stringify((await post(serveUrl, INTAKE_TOKEN, JSON.stringify(inputs[0]))).body),
    );
    await randomMoment(300, 1_000);
    await server.restart();
    await viaIntake(startUrl, inputs.slice(2 * quarter, 3 * quarter));
    await viaProducer(inputs.slice(3 * quarter));
    const enqueue = launch('enqueue', [
      'enqueue',
      '--project',
      's0',
      '--job',
      'j1',
      '--prompt',
      'one more #0',
      '--key',
      'cli-key',
    ]);
    await enqueue.exited;
    const oneMore = JSON.parse(enqueue.output.stdout) as { dispatchId: string };
    accepted.push({
      dispatchId: oneMore.dispatchId,
      input: { projectId: 's0', jobId: 'j1', prompt: 'one more #0' },
    });
    await launch('status', ['status', oneMore.dispatchId]).exited;

    const { events, quiet } = await probe.settle(accepted.length, 180_000);
    chaos.stop();
    const books = tally(accepted, events, simulator().deliveries);
    const haystack = new Haystack([
      { name: 'AGENT_API_KEY', value: KEY },
      { name: 'INTAKE_TOKEN', value: INTAKE_TOKEN },
      { name: 'DASHBOARD_TOKEN', value: DASHBOARD_TOKEN },
    ]);
    for (const url of [serveUrl, startUrl]) await addDashboard(haystack, url, DASHBOARD_TOKEN);
    await addPage(haystack, serveUrl, `/v1/followups/${oneMore.dispatchId}`, {
      authorization: `Bearer ${INTAKE_TOKEN}`,
    });
    const running = everyone.filter(
      ({ proc }) => proc.child.exitCode === null && proc.child.signalCode === null,
    );
    const alive = running.filter(({ proc }) => isAlive(proc.child)).length;
    const exits = await Promise.all(running.map(({ proc }) => proc.stop('SIGTERM')));
    for (const { name, proc } of everyone) haystack.addOutput(name, proc.output);
    await addRedis(haystack, probe.redis);
    errors.forEach((e, i) => haystack.add('error messages', `error ${i + 1}`, e));

    recordFigures(ctx, {
      category: 7,
      scenario: `worker ×2, poller, serve and start as CLI processes at LOG_LEVEL=debug, plus enqueue and status; ${accepted.length} follow-ups through the producer, both intakes and the CLI; the API behind a gateway that echoes the Authorization header in ${proxy().echoed()} error answers`,
      tried: accepted.length,
      faults: `category 4's API faults, ${proxy().echoed()} echoed keys, a worker SIGKILL, a Redis SIGKILL`,
      ...headline(books),
      leaked: haystack.leaks.length,
      notes: [
        `searched for AGENT_API_KEY, INTAKE_TOKEN and DASHBOARD_TOKEN (as is and base64): ${describeCounts(Object.fromEntries(haystack.places))}`,
        `log lines where the client scrubbed an echoed key ("Bearer [redacted]"): ${everyone.reduce((n, { proc }) => n + proc.output.stdout.split('Bearer [redacted]').length - 1, 0)}`,
        `leaks: ${
          haystack.leaks.length === 0
            ? 'none'
            : haystack.leaks
                .slice(0, 5)
                .map((l) => `${l.secret} in ${l.place}`)
                .join('; ')
        }`,
        `follow-ups ended: ${describeCounts(books.endings)}; settled to an idle namespace: ${quiet}`,
        `processes alive at the end ${alive}/${running.length}, exit codes on SIGTERM: ${[...new Set(exits)].join(', ')}`,
      ],
      durationMs: watch(),
    });
    expect(haystack.leaks).toEqual([]);
    expect(haystack.places.get('log lines')).toBeGreaterThan(100);
    expect(books.lost).toEqual([]);
    expect(books.duplicateEvents).toEqual([]);
    expect(alive).toBe(running.length);
    expect(exits.every((code) => code === 0)).toBe(true);
  });
});
