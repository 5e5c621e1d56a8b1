import { z } from 'zod';
import { parseDurability, type DurabilitySetting } from './durability.js';
import { formatDuration, parseBytes, parseDurationMs, parseRate, type Rate } from './units.js';

/**
 * The parsers of setting values, one per kind (duration, rate, integer, flag, URL, secret, token,
 * key name), each naming what it expected. The settings table (`settings.ts`) picks one per setting.
 */

/** A set value: `undefined` for an unset or blank one (`FOO=` in a compose file). */
export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

export const duration = (min: number) =>
  z.string().transform((text, ctx) => {
    const ms = parseDurationMs(text);
    if (ms === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `expected a duration such as 250ms, 5s, 2m or 1h, got "${text}"`,
      });
      return z.NEVER;
    }
    if (ms < min) {
      ctx.addIssue({
        code: 'custom',
        message: `must be at least ${formatDuration(min)}, got "${text}"`,
      });
      return z.NEVER;
    }
    return ms;
  });

export const rate = z.string().transform((text, ctx): Rate => {
  const parsed = parseRate(text);
  if (!parsed) {
    ctx.addIssue({ code: 'custom', message: `expected N/DURATION such as 100/1h, got "${text}"` });
    return z.NEVER;
  }
  return parsed;
});

export const integer = (min: number, max: number) =>
  z.string().transform((text, ctx) => {
    const value = Number(text);
    if (!/^\d+$/.test(text.trim()) || value < min || value > max) {
      ctx.addIssue({
        code: 'custom',
        message: `expected a whole number from ${min} to ${max}, got "${text}"`,
      });
      return z.NEVER;
    }
    return value;
  });

/** A byte size such as `4MiB`, from `min` to `max` bytes. */
export const byteSize = (min: number, max: number) =>
  z.string().transform((text, ctx) => {
    const bytes = parseBytes(text);
    if (bytes === undefined || bytes < min || bytes > max) {
      ctx.addIssue({
        code: 'custom',
        message: `expected a size from ${min} bytes to ${max / 1024 ** 2}MiB, such as 512KiB or 4MiB, got "${text}"`,
      });
      return z.NEVER;
    }
    return bytes;
  });

export const flag = z.string().transform((text, ctx) => {
  const value = text.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(value)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(value)) return false;
  ctx.addIssue({ code: 'custom', message: `expected true or false, got "${text}"` });
  return z.NEVER;
});

export const httpUrl = z.string().refine((text) => URL.canParse(text) && /^https?:/.test(text), {
  message: 'expected an http:// or https:// URL',
});

export const durability = z.string().transform((text, ctx): DurabilitySetting => {
  const parsed = parseDurability(text);
  if (!parsed) {
    ctx.addIssue({
      code: 'custom',
      message: `expected fsync, replicas:N or none (with ! to refuse weaker), got "${text}"`,
    });
    return z.NEVER;
  }
  return parsed;
});

/**
 * `WEBHOOK_SECRET`: `whsec_` + base64 of 16 to 64 bytes (Standard Webhooks). The message states
 * the rule only, never the value.
 */
export const webhookSecret = z.string().refine(
  (text) => {
    const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(text.trim());
    const bytes = match?.[1] ? Buffer.from(match[1], 'base64').length : 0;
    return bytes >= 16 && bytes <= 64;
  },
  { message: 'expected whsec_ followed by the base64 of 16 to 64 bytes' },
);

export const secret = z.string().min(1, { message: 'must not be empty' });

/** Shortest HTTP token accepted: a shorter one can be guessed by a patient script. */
export const MIN_TOKEN_LENGTH = 16;

/**
 * A comma-separated list of tokens (rotation: add the new one, roll out, remove the old one).
 * Blank entries are dropped; each must be long enough. The message never echoes a token.
 */
export const tokenList = z.string().transform((text, ctx): readonly string[] => {
  const tokens = [...new Set(text.split(',').map((t) => t.trim()))].filter((t) => t !== '');
  const short = tokens.findIndex((t) => t.length < MIN_TOKEN_LENGTH);
  if (short >= 0) {
    const which = tokens.length > 1 ? ` (entry ${short + 1} of ${tokens.length} is shorter)` : '';
    ctx.addIssue({
      code: 'custom',
      message: `each token must be at least ${MIN_TOKEN_LENGTH} characters${which}`,
    });
    return z.NEVER;
  }
  return Object.freeze(tokens);
});

export const keyName = z.string().regex(/^[\w{}.:-]{1,100}$/, {
  message: 'expected 1 to 100 letters, digits or the characters _ - . : { }',
});

/** `SHARDS`: shard numbers and ranges, `0-3` or `0,2,5-7`; sorted, without repeats. */
export const shardSelection = z.string().transform((text, ctx): readonly number[] => {
  const picked = new Set<number>();
  for (const part of text.split(',')) {
    const match = /^\s*(\d+)(?:\s*-\s*(\d+))?\s*$/.exec(part);
    const from = Number(match?.[1]);
    const to = match?.[2] === undefined ? from : Number(match[2]);
    if (!match || to < from || to - from > 1024) {
      ctx.addIssue({
        code: 'custom',
        message: `expected shards such as 0-3 or 0,2,5, got "${text}"`,
      });
      return z.NEVER;
    }
    for (let i = from; i <= to; i++) picked.add(i);
  }
  return Object.freeze([...picked].sort((a, b) => a - b));
});

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const LOG_FORMATS = ['json', 'pretty'] as const;

/** Trace exporters the Node SDK knows (`OTEL_TRACES_EXPORTER`); `none` turns tracing off. */
export const TRACES_EXPORTERS = ['otlp', 'console', 'zipkin', 'none'] as const;

/** `OTEL_TRACES_EXPORTER`: a comma-separated list; the exporters to start (none: off). */
export const tracesExporters = z.string().transform((text, ctx) => {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const unknown = names.filter((n) => !(TRACES_EXPORTERS as readonly string[]).includes(n));
  if (unknown.length > 0) {
    ctx.addIssue({
      code: 'custom',
      message: `expected ${TRACES_EXPORTERS.join(', ')} (comma-separated), got "${unknown.join(', ')}"`,
    });
    return z.NEVER;
  }
  return names.includes('none') ? [] : [...new Set(names)];
});

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
