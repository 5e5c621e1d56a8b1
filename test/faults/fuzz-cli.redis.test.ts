import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliToEnd } from '../support/cli.js';
import { useNamespace } from '../support/namespace.js';
import { recordFigures, stopwatch } from './support/figures.js';
import { FuzzBooks } from './support/fuzz-books.js';
import { cliAnswers, ndjsonLines } from './support/ndjson.js';
import { useProbe } from './support/quiet.js';
import { SCALE } from './support/scale.js';

const PROMPT_MAX_BYTES = 64;

describe('5. bad input: agent-dispatch enqueue --file', () => {
  const ns = useNamespace('f-fuzz-cli', { scope: 'all' });
  const probe = useProbe(ns, 'all');
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-fuzz-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('enqueues exactly the valid lines and reports each bad one by number and field', async (ctx) => {
    const watch = stopwatch();
    const books = new FuzzBooks(PROMPT_MAX_BYTES);
    const problems: string[] = [];
    let brokenJson = 0;
    let lines = 0;
    for (let f = 0; f < SCALE.fuzz.cliFiles; f++) {
      const file = ndjsonLines(SCALE.fuzz.cliLinesPerFile, PROMPT_MAX_BYTES);
      lines += file.length;
      const path = join(dir, `followups-${f}.ndjson`);
      writeFileSync(path, file.map((l) => l.text).join('\n'));
      const run = await runCliToEnd(
        ['enqueue', '--file', path],
        ns().env({ PROMPT_MAX_BYTES: String(PROMPT_MAX_BYTES) }),
      );
      const answers = cliAnswers(run.stdout, run.stderr);
      let bad = 0;
      file.forEach((line, i) => {
        const answer = answers.get(i + 1);
        if (line.text.trim() === '') {
          if (answer) problems.push(`blank line ${i + 1} answered`);
        } else if (!('parsed' in line)) {
          brokenJson++;
          bad++;
          if (answer?.kind !== 'rejected' || answer.fields[0] !== '(json)')
            problems.push(`line ${i + 1} is not JSON but got ${JSON.stringify(answer)}`);
        } else {
          books.check(
            line.parsed,
            answer ?? { kind: 'error', message: `no answer for line ${i + 1}` },
          );
          if (answer?.kind === 'rejected' || answer?.kind === 'conflict') bad++;
        }
      });
      if (run.code !== (bad > 0 ? 1 : 0))
        problems.push(`file ${f} exited ${run.code} with ${bad} bad lines`);
    }
    await books.audit(ns().redis, ns().prefix, await probe().pendingJobs());

    recordFigures(ctx, {
      category: 5,
      scenario: `agent-dispatch enqueue --file: ${SCALE.fuzz.cliFiles} generated NDJSON files of ${SCALE.fuzz.cliLinesPerFile + 3} lines (3 with a 1 MiB prompt), PROMPT_MAX_BYTES ${PROMPT_MAX_BYTES}`,
      tried: books.tried + brokenJson,
      faults: 'generated lines: follow-ups valid and invalid, broken JSON, blank lines',
      lost: books.refusedValid,
      duplicated: books.enqueuedInvalid,
      leaked: 0,
      notes: [
        `${lines} lines: valid ${books.valid} (accepted ${books.firsts.size} distinct dispatches, ${books.conflicts} refused as key conflicts), invalid ${books.invalid}, not JSON ${brokenJson}, the rest blank`,
        `rule violations ${books.violations.length + problems.length}${books.violations.length + problems.length ? `: ${[...problems, ...books.sample(3)].slice(0, 3).join(' | ')}` : ''}; exit codes: 1 for a file with a bad line, never a crash`,
      ],
      durationMs: watch(),
    });
    expect(problems).toEqual([]);
    expect(books.sample(10)).toEqual([]);
  });
});
