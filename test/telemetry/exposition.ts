/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for tests: it throws on
 * anything a Prometheus server would reject, and on a few things it would only frown at (a sample
 * of an undeclared family, a histogram whose buckets go down).
 */

/** One sample line. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** One metric family: its `# TYPE`, `# HELP` and samples. */
export interface Family {
  readonly name: string;
  type: string;
  help: string | undefined;
  readonly samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];
const SUFFIXES: Record<string, string[]> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

/** Parses `text` into families by name; throws with the line number on the first error. */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline');
  text
    .slice(0, -1)
    .split('\n')
    .forEach((line, i) => {
      try {
        parseLine(line, families);
      } catch (err) {
        throw new Error(`line ${i + 1}: ${(err as Error).message}: ${line.slice(0, 120)}`);
      }
    });
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return families;
}

function parseLine(line: string, families: Map<string, Family>): void {
  if (line.trim() === '') return;
  const meta = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
  if (meta) {
    const [, kind, name = '', rest = ''] = meta;
    if (!NAME.test(name)) throw new Error(`bad metric name ${name}`);
    const family = families.get(name) ?? { name, type: 'untyped', help: undefined, samples: [] };
    families.set(name, family);
    if (kind === 'HELP') family.help = rest;
    else if (!TYPES.includes(rest) || family.samples.length > 0)
      throw new Error(`bad or late TYPE ${rest}`);
    else family.type = rest;
    return;
  }
  if (line.startsWith('#')) return;
  const sample = parseSample(line);
  const family = familyOf(sample.name, families);
  if (!family) throw new Error(`sample of undeclared family ${sample.name}`);
  family.samples.push(sample);
}

function parseSample(line: string): Sample {
  const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)(?: (-?\d+))?$/.exec(line);
  if (!match) throw new Error('malformed sample');
  const [, name = '', labelText, valueText = ''] = match;
  const value = parseValue(valueText);
  return { name, labels: labelText ? parseLabels(labelText.slice(1, -1)) : {}, value };
}

function parseValue(text: string): number {
  // Prometheus parses values with Go's ParseFloat, which takes Inf and NaN in any case; prom-client
  // writes NaN as "Nan".
  if (/^\+?inf$/i.test(text)) return Infinity;
  if (/^-inf$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (!/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`bad value ${text}`);
  return Number(text);
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const pair = /\s*([^=\s]+)="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)/y;
  while (pair.lastIndex < text.length) {
    const match = pair.exec(text);
    if (!match) throw new Error('malformed labels');
    const [, name = '', raw = ''] = match;
    if (!LABEL.test(name) || name in labels) throw new Error(`bad or repeated label ${name}`);
    labels[name] = raw.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
  }
  return labels;
}

function familyOf(sampleName: string, families: Map<string, Family>): Family | undefined {
  for (const family of families.values()) {
    const suffixes = SUFFIXES[family.type] ?? [''];
    if (suffixes.some((suffix) => family.name + suffix === sampleName)) return family;
  }
  return undefined;
}

/** Buckets of each series rise with `le` and end at `+Inf`, which equals `_count`. */
function checkHistogram(family: Family): void {
  const series = new Map<string, Sample[]>();
  for (const sample of family.samples.filter((s) => s.name.endsWith('_bucket'))) {
    const { le, ...rest } = sample.labels;
    if (le === undefined) throw new Error(`${family.name}: bucket without le`);
    const key = canonical(rest);
    series.set(key, [...(series.get(key) ?? []), sample]);
  }
  for (const [key, buckets] of series) {
    const counts = buckets.map((b) => b.value);
    if (counts.some((c, i) => i > 0 && c < (counts[i - 1] ?? 0)))
      throw new Error(`${family.name}: buckets go down`);
    const last = buckets.at(-1);
    const count = family.samples.find(
      (s) => s.name === `${family.name}_count` && canonical(s.labels) === key,
    );
    if (last?.labels['le'] !== '+Inf' || count?.value !== last.value) {
      throw new Error(`${family.name}: +Inf bucket missing or different from _count`);
    }
  }
}

function canonical(labels: Readonly<Record<string, string>>): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)));
}
