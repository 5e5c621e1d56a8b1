import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { intakeBodyLimitBytes, MAX_BATCH } from '../../src/http/index.js';
import { loadConfig } from '../../src/config/index.js';
import { useOpened } from '../support/hooks.js';
import { useNamespace } from '../support/namespace.js';
import { batchArb, inputArb } from './support/arbitraries.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { FuzzBooks } from './support/fuzz-books.js';
import { batchAnswer, post, singleAnswer, startIntake } from './support/intake.js';
import { useProbe } from './support/quiet.js';
import { SCALE } from './support/scale.js';

const PROMPT_MAX_BYTES = 64;
const TOKEN = 'faults-intake-token-5c1d';

type Request =
  | { kind: 'single'; value: unknown }
  | { kind: 'batch'; value: unknown[]; wrapped: boolean }
  | { kind: 'broken'; text: string };

const requestArb: fc.Arbitrary<Request> = fc.oneof(
  {
    arbitrary: inputArb(PROMPT_MAX_BYTES).map((value) => ({ kind: 'single' as const, value })),
    weight: 5,
  },
  {
    arbitrary: fc
      .tuple(batchArb(PROMPT_MAX_BYTES, 40), fc.boolean())
      .map(([value, wrapped]) => ({ kind: 'batch' as const, value, wrapped })),
    weight: 10,
  },
  {
    arbitrary: fc
      .constantFrom('{"projectId": ', '[{"projectId":"p"},', '{,}', 'nope')
      .map((text) => ({ kind: 'broken' as const, text })),
    weight: 1,
  },
);

describe('5. bad input: the HTTP intake', () => {
  const ns = useNamespace('f-fuzz-http', { scope: 'all' });
  const probe = useProbe(ns, 'all');
  const intake = useOpened(
    'intake',
    () =>
      startIntake(ns().config({ INTAKE_TOKEN: TOKEN, PROMPT_MAX_BYTES: String(PROMPT_MAX_BYTES) })),
    'all',
  );

  it('accepts exactly the valid follow-ups and answers 400 naming each bad field, 413 for big bodies', async (ctx) => {
    const watch = stopwatch();
    const books = new FuzzBooks(PROMPT_MAX_BYTES);
    const problems: string[] = [];
    const statuses: Record<number, number> = {};
    for (const request of fc.sample(requestArb, SCALE.fuzz.intakeRequests)) {
      if (request.kind === 'broken') {
        const reply = await post(intake().url, TOKEN, request.text);
        statuses[reply.status] = (statuses[reply.status] ?? 0) + 1;
        if (reply.status !== 400 || reply.body['error'] !== 'request body is not valid JSON')
          problems.push(`broken JSON answered ${reply.status}`);
        continue;
      }
      const items = JSON.parse(JSON.stringify(request.value)) as unknown;
      const body = request.kind === 'batch' && request.wrapped ? { followups: items } : items;
      const reply = await post(intake().url, TOKEN, JSON.stringify(body));
      statuses[reply.status] = (statuses[reply.status] ?? 0) + 1;
      if (!Array.isArray(items)) books.check(items, singleAnswer(reply));
      else if (items.length > 0) books.checkBatch(items, batchAnswer(reply));
      else if (reply.status !== 400) problems.push(`an empty batch answered ${reply.status}`);
    }
    const edges = await edgeCases(intake().url);
    problems.push(...edges.problems);
    const health = await fetch(`${intake().url}/healthz`);
    await books.audit(ns().redis, ns().prefix, await probe().pendingJobs());

    recordFigures(ctx, {
      category: 5,
      scenario: `HTTP intake() (POST /v1/followups over real HTTP): ${SCALE.fuzz.intakeRequests} generated requests (single follow-ups, batches of 1–40 bare or as {"followups": […]}, broken JSON), PROMPT_MAX_BYTES ${PROMPT_MAX_BYTES}`,
      tried: books.tried + edges.tried,
      faults:
        'generated bodies, valid and invalid; oversized bodies, oversized batches, wrong content type, wrong token',
      lost: books.refusedValid,
      duplicated: books.enqueuedInvalid,
      leaked: 0,
      notes: [
        `follow-ups: valid ${books.valid} (accepted ${books.firsts.size} distinct dispatches, ${books.conflicts} refused as key conflicts), invalid ${books.invalid}; answers by status: ${Object.entries(
          statuses,
        )
          .map(([s, n]) => `${s} ${n}`)
          .join(', ')}`,
        `edge cases: ${edges.seen.join('; ')}`,
        `rule violations ${books.violations.length + problems.length}${books.violations.length + problems.length ? `: ${[...problems, ...books.sample(3)].slice(0, 3).join(' | ')}` : ''}; /healthz after the run: ${health.status}`,
      ],
      durationMs: watch(),
    });
    expect(problems).toEqual([]);
    expect(books.sample(10)).toEqual([]);
    expect(health.status).toBe(200);
  });
});

/** Bodies too big, batches too long, the wrong content type and token: each with its status. */
async function edgeCases(
  url: string,
): Promise<{ tried: number; seen: string[]; problems: string[] }> {
  const limit = intakeBodyLimitBytes(PROMPT_MAX_BYTES, loadConfig({}).httpBodyMaxBytes);
  const one = (prompt: string) => ({ projectId: 'p', jobId: 'j', prompt });
  const cases: [
    string,
    Promise<{ status: number; body: Record<string, unknown> }>,
    number,
    RegExp,
  ][] = [
    [
      'body over the limit',
      post(url, TOKEN, JSON.stringify(one('x'.repeat(limit + 1)))),
      413,
      new RegExp(`larger than ${limit} bytes`),
    ],
    [
      'prompt over PROMPT_MAX_BYTES',
      post(url, TOKEN, JSON.stringify(one('é'.repeat(PROMPT_MAX_BYTES)))),
      400,
      /invalid follow-up/,
    ],
    [
      `batch of ${MAX_BATCH + 1}`,
      post(url, TOKEN, JSON.stringify(Array.from({ length: MAX_BATCH + 1 }, () => one('x')))),
      400,
      /invalid follow-up/,
    ],
    [
      'text/plain body',
      post(url, TOKEN, JSON.stringify(one('x')), 'text/plain'),
      415,
      /application\/json/,
    ],
    ['wrong token', post(url, 'not-the-token', JSON.stringify(one('x'))), 401, /token/],
    ['{"followups": {}}', post(url, TOKEN, '{"followups": {}}'), 400, /invalid follow-up/],
  ];
  const seen: string[] = [];
  const problems: string[] = [];
  for (const [name, reply, status, pattern] of cases) {
    const { status: got, body } = await reply;
    seen.push(`${name} → ${got}`);
    if (got !== status || !pattern.test(JSON.stringify(body)))
      problems.push(`${name}: ${got} ${JSON.stringify(body).slice(0, 200)}`);
  }
  return { tried: cases.length, seen, problems };
}
