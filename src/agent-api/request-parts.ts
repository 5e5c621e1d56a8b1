import { AgentApiError } from './errors.js';

/** The parts of an agent-API request and answer that the client builds and cleans. */

/** `value` (parsed JSON) with `scrub` applied to every string in it, keys included. */
export function scrubStrings(value: unknown, scrub: (text: string) => string): unknown {
  if (typeof value === 'string') return scrub(value);
  if (Array.isArray(value)) return value.map((item) => scrubStrings(item, scrub));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [scrub(key), scrubStrings(item, scrub)]),
  );
}

export function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/**
 * One encoded path segment. `.` and `..` are encoded too, because a proxy that normalises dot
 * segments would otherwise send the call to another path.
 */
export function segment(name: string, value: string): string {
  if (value === '') {
    throw new AgentApiError(`agent API call needs a non-empty ${name}`, {
      code: 'bad_request',
      ambiguous: false,
    });
  }
  const encoded = encodeURIComponent(value);
  return encoded === '.' || encoded === '..' ? encoded.replaceAll('.', '%2E') : encoded;
}
