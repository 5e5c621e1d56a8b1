import fc from 'fast-check';
import type { Answer } from './fuzz-books.js';
import { inputArb } from './arbitraries.js';

/** One line of a generated NDJSON file, and what it holds once parsed (absent: not JSON). */
export interface Line {
  readonly text: string;
  readonly parsed?: unknown;
}

const garbage = fc.oneof(
  fc
    .string({ unit: 'binary', minLength: 1, maxLength: 40 })
    .filter((s) => !/[\r\n]/.test(s) && s.trim() !== '' && !parses(s)),
  fc.constantFrom(
    '{"projectId": ',
    '{"projectId":"p","jobId":"j","prompt":"x",}',
    "{'projectId':'p'}",
    'undefined',
    '{"prompt":"\\ud800"',
  ),
);

/** `count` lines: mostly generated follow-ups as JSON, some broken JSON, a few blank lines. */
export function ndjsonLines(count: number, promptMaxBytes: number): Line[] {
  const line = fc.oneof(
    { arbitrary: inputArb(promptMaxBytes).map(toLine), weight: 90 },
    { arbitrary: garbage.map((text) => ({ text })), weight: 7 },
    { arbitrary: fc.constantFrom('', '   ', '\t').map((text) => ({ text })), weight: 3 },
  );
  const lines = fc.sample(line, count);
  // A few huge prompts: a line of a megabyte must be read and refused like any other.
  for (let i = 0; i < 3; i++)
    lines.push(toLine({ projectId: 'big', jobId: `j${i}`, prompt: 'x'.repeat(1 << 20) }));
  return lines;
}

function toLine(value: unknown): Line {
  const text = JSON.stringify(value);
  return { text, parsed: JSON.parse(text) as unknown };
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Reads `enqueue --file`'s answers back, by line number. */
export function cliAnswers(stdout: string, stderr: string): Map<number, Answer> {
  const answers = new Map<number, Answer>();
  for (const text of stdout.split('\n')) {
    if (!text.startsWith('{')) continue;
    const { line, dispatchId, deduplicated } = JSON.parse(text) as {
      line: number;
      dispatchId: string;
      deduplicated: boolean;
    };
    answers.set(line, { kind: 'accepted', dispatchId, deduplicated });
  }
  for (const text of stderr.split('\n')) {
    const match = /^line (\d+): (.*)$/.exec(text);
    if (!match) continue;
    const message = match[2] ?? '';
    const conflict = /^key: already used for a different follow-up \(dispatch (\S+)\)$/.exec(
      message,
    );
    if (conflict) {
      answers.set(Number(match[1]), { kind: 'conflict', dispatchId: conflict[1] ?? '' });
      continue;
    }
    const fields = message === 'not valid JSON' ? ['(json)'] : fieldsOf(message);
    answers.set(Number(match[1]), { kind: 'rejected', fields, message });
  }
  return answers;
}

/** `a: must …; b: must …` → `['a', 'b']`. */
function fieldsOf(message: string): string[] {
  return message.split('; ').map((part) => part.slice(0, Math.max(0, part.indexOf(': '))));
}
