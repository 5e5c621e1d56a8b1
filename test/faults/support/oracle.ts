/**
 * The test's own idea of a valid follow-up, written from the contract and the producer's docs,
 * independently of the producer's schema:
 *
 * - an object with `projectId`, `jobId`, `prompt`, optionally `key` and `meta`, nothing else;
 * - `projectId`, `jobId` and `key`: strings of 1 to 200 characters (Unicode code points),
 *   well-formed (they travel in URL paths and Redis keys, which hold UTF-8), no control character
 *   (C0, DEL, C1), not blank;
 * - `prompt`: a well-formed string of at least 1 character and at most `promptMaxBytes` UTF-8 bytes;
 * - `meta`: a plain object of JSON values (finite numbers, no `undefined`, functions or class
 *   instances) whose JSON is at most 4096 UTF-8 bytes, nested at most 32 levels (`{}` is one),
 *   with every key kept, `__proto__` included.
 *
 * An optional field whose value is `undefined` or `null` counts as absent, as JSON clients mean it.
 * A missing field and an unknown one that differs from it only in case (`projectID`) are one
 * problem: the producer names the unknown field and says which one it stands for.
 */

export const ID_MAX = 200;
export const META_MAX_BYTES = 4096;
export const META_MAX_DEPTH = 32;
const ALLOWED = new Set(['projectId', 'jobId', 'prompt', 'key', 'meta']);

/** The fields of `input` that make it invalid (empty when it is valid); `(body)` for a non-object. */
export function badFields(input: unknown, promptMaxBytes: number): string[] {
  if (!isPlainObject(input)) return ['(body)'];
  const bad = Object.keys(input).filter((k) => !ALLOWED.has(k));
  if (!isId(input['projectId'])) bad.push('projectId');
  if (!isId(input['jobId'])) bad.push('jobId');
  if (!isPrompt(input['prompt'], promptMaxBytes)) bad.push('prompt');
  if (input['key'] != null && !isId(input['key'])) bad.push('key');
  if (input['meta'] != null && !isMeta(input['meta'])) bad.push('meta');
  const standIns = new Set(
    bad.map((f) => f.toLowerCase()).filter((f, i) => !ALLOWED.has(bad[i] ?? '')),
  );
  return bad.filter(
    (f) => !(ALLOWED.has(f) && input[f] === undefined && standIns.has(f.toLowerCase())),
  );
}

function isId(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  const chars = [...value].length;
  if (chars < 1 || chars > ID_MAX) return false;
  if (!wellFormed(value) || /^\s*$/u.test(value)) return false;
  for (const char of value) {
    const cp = char.codePointAt(0) ?? 0;
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) return false;
  }
  return true;
}

function isPrompt(value: unknown, maxBytes: number): boolean {
  return (
    typeof value === 'string' &&
    value.length > 0 &&
    wellFormed(value) &&
    utf8Bytes(value) <= maxBytes
  );
}

function isMeta(value: unknown): boolean {
  return (
    isPlainObject(value) && isJson(value, 1) && utf8Bytes(JSON.stringify(value)) <= META_MAX_BYTES
  );
}

function isJson(value: unknown, depth: number): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (depth > META_MAX_DEPTH) return false;
  if (Array.isArray(value)) return value.every((v) => isJson(v, depth + 1));
  return isPlainObject(value) && Object.values(value).every((v) => isJson(v, depth + 1));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** No lone surrogate: every high surrogate is followed by a low one, and only then. */
function wellFormed(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) return false;
  }
  return true;
}

/** UTF-8 length, counted by code point (for well-formed text). */
export function utf8Bytes(text: string): number {
  let bytes = 0;
  for (const char of text) {
    const cp = char.codePointAt(0) ?? 0;
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return bytes;
}

/** The top-level field a producer problem names (`meta.a.b` → `meta`, `a, b` → both). */
export function topFields(field: string): string[] {
  return field.split(', ').map((f) => f.split('.')[0] ?? f);
}
