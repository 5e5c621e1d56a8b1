/**
 * The agent API's bearer key as the client uses it: checked, made into the headers of its calls,
 * and scrubbed from parsed answers that a JSON escape hid it in. The key is never logged nor put
 * in an error message, not even a malformed one.
 */

/** Bearer tokens are token68 characters in practice; anything else would break the header. */
const API_KEY_SHAPE = /^[\x21-\x7e]+$/;

/** The headers of the client's calls with one key: a read's, and a send's (with a body). */
export interface KeyHeaders {
  readonly get: Readonly<Record<string, string>>;
  readonly send: Readonly<Record<string, string>>;
}

/** The headers that carry `apiKey`; throws a `TypeError` (without the key) for a malformed one. */
export function keyHeaders(apiKey: string): KeyHeaders {
  if (!API_KEY_SHAPE.test(apiKey)) {
    // The message must not echo the key, not even a malformed one.
    throw new TypeError('apiKey must be a non-empty string of visible ASCII characters');
  }
  const get = { authorization: `Bearer ${apiKey}`, accept: 'application/json' };
  return { get, send: { ...get, 'content-type': 'application/json' } };
}

/** `value` (parsed JSON) with `scrub` applied to every string in it, keys included. */
export function scrubStrings(value: unknown, scrub: (text: string) => string): unknown {
  if (typeof value === 'string') return scrub(value);
  if (Array.isArray(value)) return value.map((item) => scrubStrings(item, scrub));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [scrub(key), scrubStrings(item, scrub)]),
  );
}
