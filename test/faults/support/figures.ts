import type { TestContext } from 'vitest';
import { SCALE } from './scale.js';

/**
 * What one fault drill tried and what came of it. Each test records its figures before it asserts
 * on them, so a failing drill still shows up in the report with the numbers that failed it; the
 * reporter (`reporter.ts`) turns them into RELIABILITY.md at the end of the run.
 */
export interface Figures {
  /** The category, `1`..`7`. */
  readonly category: number;
  /** One line: the set-up and the faults injected. */
  readonly scenario: string;
  /** Follow-ups (or generated inputs) put through the drill. */
  readonly tried: number;
  /** Faults injected, such as `20 SIGKILLs`. */
  readonly faults: string;
  /** Accepted follow-ups without a terminal event (or valid inputs refused). */
  readonly lost: number;
  /** Prompts delivered twice, events published twice, invalid inputs enqueued. */
  readonly duplicated: number;
  /** Secrets found where they must not be. */
  readonly leaked: number;
  /** Further figures, one short line each. */
  readonly notes: readonly string[];
  /** Wall time of the drill. */
  readonly durationMs: number;
  /** The scale that produced these figures. */
  readonly scale: string;
}

declare module 'vitest' {
  interface TaskMeta {
    /** Set by {@link recordFigures}; read by the reliability reporter. */
    faultFigures?: Figures;
  }
}

/** Attaches a drill's figures to its test, for the reporter. */
export function recordFigures(
  context: Pick<TestContext, 'task'>,
  figures: Omit<Figures, 'scale'>,
): Figures {
  const full = { ...figures, scale: SCALE.name };
  context.task.meta.faultFigures = full;
  console.log(
    `[faults] ${full.category}. ${full.scenario}: tried ${full.tried}, ${full.faults}; lost ${full.lost}, duplicated ${full.duplicated}, leaked ${full.leaked}\n  ${full.notes.join('\n  ')}`,
  );
  return full;
}

/** A stopwatch for a drill's `durationMs`. */
export function stopwatch(): () => number {
  const started = performance.now();
  return () => Math.round(performance.now() - started);
}

/** `{a: 2, b: 1}` as `a 2, b 1`, largest first. */
export function describeCounts(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts).sort((x, y) => y[1] - x[1]);
  return entries.length === 0 ? 'none' : entries.map(([k, n]) => `${k} ${n}`).join(', ');
}
