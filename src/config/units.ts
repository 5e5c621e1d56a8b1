/**
 * Parsers for the value shapes the settings use: durations (`250ms`, `5s`, `2m`, `1h`, `7d`),
 * rates (`N/DURATION`, such as `100/1h`) and byte sizes (`512KiB`, `4MiB`).
 */

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const RATE = /^(\d+)\/(.+)$/;

/** A per-window budget: at most `max` events in any window of `windowMs` milliseconds. */
export interface Rate {
  readonly max: number;
  readonly windowMs: number;
}

/** Parses `250ms`, `5s`, `2m`, `1h` or `7d` into whole milliseconds; `undefined` when malformed. */
export function parseDurationMs(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  const [, amount, unit] = match;
  const ms = Math.round(Number(amount) * UNIT_MS[unit as keyof typeof UNIT_MS]);
  return Number.isFinite(ms) ? ms : undefined;
}

/** Parses `N/DURATION` into a {@link Rate}; `undefined` when malformed or not positive. */
export function parseRate(text: string): Rate | undefined {
  const match = RATE.exec(text.trim());
  if (!match) return undefined;
  const max = Number(match[1]);
  const windowMs = parseDurationMs(match[2] ?? '');
  if (!Number.isSafeInteger(max) || max < 1 || windowMs === undefined || windowMs < 1) {
    return undefined;
  }
  return { max, windowMs };
}

/** Formats milliseconds the way settings are written, for logs and `--help`. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (ms >= UNIT_MS[unit] && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}

const UNIT_BYTES = {
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
} as const;
const BYTES = /^(\d+(?:\.\d+)?)\s*(b|kib|mib|gib|kb|mb|gb)?$/i;

/** Parses `65536`, `512KiB`, `4MiB` or `1GB` into whole bytes; `undefined` when malformed. */
export function parseBytes(text: string): number | undefined {
  const match = BYTES.exec(text.trim());
  if (!match) return undefined;
  const unit = (match[2] ?? 'b').toLowerCase() as keyof typeof UNIT_BYTES;
  const bytes = Math.floor(Number(match[1]) * UNIT_BYTES[unit]);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}
