import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Reporter, TestModule } from 'vitest/node';
import type { Figures } from './figures.js';
import { AOF_BOUND, CATEGORIES, HOW_TO_RUN, LEGEND } from './report-text.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const OUTPUT = process.env['FAULTS_REPORT'] ?? `${ROOT}docs/reports/reliability.md`;
const SCALES = ['full', 'ci'] as const;

/** One drill's figures and how its test ended. */
interface Row {
  readonly test: string;
  readonly state: string;
  readonly figures: Figures;
}

/**
 * Writes RELIABILITY.md from the figures the drills recorded, once every category has figures (a
 * run filtered to some files prints its figures but leaves the report alone). The figures of the
 * other scale, from an earlier run, are kept as they were.
 */
export default class ReliabilityReporter implements Reporter {
  #startedAt = Date.now();

  onTestRunStart(): void {
    this.#startedAt = Date.now();
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const rows: Row[] = [];
    for (const module of modules) {
      for (const test of module.children.allTests()) {
        const figures = test.meta().faultFigures;
        const state = test.result().state;
        // An `it.fails` test documents a known issue: it passes while the issue is there.
        const shown = test.options.fails
          ? `known issue (${state === 'passed' ? 'still there' : 'gone? remove .fails'})`
          : state;
        if (figures) rows.push({ test: test.fullName, state: shown, figures });
      }
    }
    const missing = CATEGORIES.filter((c) => !rows.some((r) => r.figures.category === c.number));
    if (rows.length === 0) return;
    if (missing.length > 0) {
      console.log(
        `[faults] RELIABILITY.md left as it is: no figures for ${missing.map((c) => c.number).join(', ')} in this run`,
      );
      return;
    }
    const scale = rows[0]?.figures.scale ?? 'ci';
    const previous = existsSync(OUTPUT) ? readFileSync(OUTPUT, 'utf8') : '';
    const sections = SCALES.map((s) =>
      s === scale ? figuresSection(scale, rows, Date.now() - this.#startedAt) : kept(previous, s),
    );
    writeFileSync(OUTPUT, document(sections));
    console.log(`[faults] wrote the ${scale} figures to ${OUTPUT}`);
  }
}

function document(sections: readonly string[]): string {
  return [
    '# Reliability under faults',
    '',
    'Written by the fault suite itself (`npm run test:faults`, issue 7) at the end of a run; rerun',
    'it rather than edit this file. A run writes the figures of its scale and keeps those of the',
    'other: `full` is the sizes of issue 7, `ci` the smaller default that CI runs.',
    '',
    ...sections.filter(Boolean),
    '## What each drill does',
    '',
    ...CATEGORIES.flatMap((c) => [`### ${c.number}. ${c.title}`, '', c.method, '']),
    AOF_BOUND,
    '',
    HOW_TO_RUN,
    '',
  ].join('\n');
}

/** The figures of one run, between markers so a later run of the other scale can keep them. */
function figuresSection(scale: string, rows: readonly Row[], runMs: number): string {
  const sorted = [...rows].sort((a, b) => a.figures.category - b.figures.category);
  const failed = sorted.filter((r) => r.state !== 'passed' && !r.state.includes('still there'));
  const lines = [
    `<!-- figures:${scale}:start -->`,
    `## Figures at scale \`${scale}\``,
    '',
    `Run of ${new Date().toISOString()} on Node ${process.version}, ${cpus().length} cores, commit ${commit()}: ${(runMs / 60_000).toFixed(1)} minutes, ${failed.length === 0 ? 'every drill passed' : `**${failed.length} drill(s) failed**`}.`,
    '',
    '| # | drill | tried | faults injected | lost | duplicated | leaked | result | time |',
    '| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: |',
    ...sorted.map(({ figures: f, state }) => {
      const title = CATEGORIES.find((c) => c.number === f.category)?.title ?? '';
      return `| ${f.category} | ${title} | ${f.tried} | ${f.faults} | ${f.lost} | ${f.duplicated} | ${f.leaked} | ${state} | ${(f.durationMs / 1000).toFixed(0)} s |`;
    }),
    '',
    LEGEND,
    '',
  ];
  for (const { figures: f, test, state } of sorted) {
    lines.push(`**${test}** (${state}, ${(f.durationMs / 1000).toFixed(0)} s): ${f.scenario}.`, '');
    lines.push(...f.notes.map((note) => `- ${note}`), '');
  }
  lines.push(`<!-- figures:${scale}:end -->`, '');
  return lines.join('\n');
}

/** The section of `scale` from the previous file, if it had one. */
function kept(previous: string, scale: string): string {
  const start = previous.indexOf(`<!-- figures:${scale}:start -->`);
  const end = previous.indexOf(`<!-- figures:${scale}:end -->`);
  if (start < 0 || end < start) return '';
  return `${previous.slice(start, end + `<!-- figures:${scale}:end -->`.length)}\n`;
}

function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  } catch {
    return 'unknown';
  }
}
