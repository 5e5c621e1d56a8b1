/**
 * Small statistics and number formatting for the benchmark tables. Every figure in BENCHMARKS.md
 * goes through here, so all tables round and group digits the same way.
 */

/** The median of `values` (mean of the middle two for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const upper = sorted[mid] as number;
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] as number) + upper) / 2;
}

/** The `p`-th percentile (0 to 100) by nearest rank; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/** The index of the run whose `value` is the median one (the lower middle for an even count). */
export function medianIndex(values: readonly number[]): number {
  const order = values.map((v, i) => [v, i] as const).sort((a, b) => a[0] - b[0]);
  return order[Math.floor((order.length - 1) / 2)]?.[1] ?? 0;
}

/** `1234.5` → `1,235`; `digits` decimals below 100 so small figures keep their precision. */
export function num(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return 'n/a';
  const decimals = Math.abs(value) >= 100 ? 0 : digits;
  return value.toLocaleString('en-US', {
    minimumFractionDigits: decimals,
    maximumFractionDigits: decimals,
  });
}

/** A share as a percentage: `0.973` → `97.3 %`. */
export function pct(share: number): string {
  return Number.isFinite(share) ? `${(share * 100).toFixed(1)} %` : 'n/a';
}

/** Milliseconds, switching to seconds from 10 s: `834 ms`, `12.3 s`. */
export function ms(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

/** Bytes in the largest binary unit that keeps the figure at or above 1: `1.5 MiB`. */
export function bytes(value: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let v = value;
  let unit = 0;
  while (Math.abs(v) >= 1024 && unit < units.length - 1) {
    v /= 1024;
    unit += 1;
  }
  return `${v.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** The per-run values behind a median, for the notes: `3,012 / 3,100 / 2,980`. */
export function runs(values: readonly number[], format: (v: number) => string = num): string {
  return values.map(format).join(' / ');
}

/** Runs of one configuration: every run, its figure per run, and the run with the median figure. */
export interface Repeated<T> {
  readonly values: readonly number[];
  readonly median: number;
  readonly typical: T;
}

/**
 * Runs `once` up to `times` times in a row; `figure` picks the number the median is taken of.
 * Before each repeat, `mayRepeat` is asked with the last run's duration (the time budget).
 */
export async function repeated<T>(
  times: number,
  once: (run: number) => Promise<T>,
  figure: (result: T) => number,
  mayRepeat: (estimateMs: number) => boolean = () => true,
): Promise<Repeated<T>> {
  const results: T[] = [];
  let lastMs = 0;
  for (let run = 0; run < times && (run === 0 || mayRepeat(lastMs)); run++) {
    const started = Date.now();
    results.push(await once(run));
    lastMs = Date.now() - started;
  }
  return medianOf(results, figure);
}

/** The runs' figures, their median, and the run with the median figure. */
function medianOf<T>(results: readonly T[], figure: (result: T) => number): Repeated<T> {
  const values = results.map(figure);
  return { values, median: median(values), typical: results[medianIndex(values)] as T };
}

/** One side of {@link repeatedPairs}: a run of it, and the figure its median is taken of. */
export interface Side<T> {
  readonly once: (run: number) => Promise<T>;
  readonly figure: (result: T) => number;
}

/**
 * Runs ours and the baseline in pairs, one after the other, up to `times` pairs: both sides get as
 * many runs whatever the time budget allows (`mayRepeat` is asked before each pair with the last
 * pair's duration), and a drift of the machine meanwhile touches both alike.
 */
export async function repeatedPairs<A, B>(
  times: number,
  ours: Side<A>,
  baseline: Side<B>,
  mayRepeat: (estimateMs: number) => boolean = () => true,
): Promise<{ ours: Repeated<A>; baseline: Repeated<B> }> {
  const a: A[] = [];
  const b: B[] = [];
  await repeated(
    times,
    async (run) => {
      a.push(await ours.once(run));
      b.push(await baseline.once(run));
    },
    () => 0,
    mayRepeat,
  );
  return { ours: medianOf(a, ours.figure), baseline: medianOf(b, baseline.figure) };
}
