import { hash } from 'node:crypto';
import type { FollowUp } from './followup.js';

/**
 * The digest of a follow-up's content (project, job, prompt, meta), stored on its record: a second
 * send with the same idempotency key and another digest is a conflict, not a duplicate. Meta keys
 * are sorted, so the same object built in another order is the same follow-up.
 */
export function contentDigest(followUp: FollowUp): string {
  const content = [
    JSON.stringify(followUp.projectId),
    JSON.stringify(followUp.jobId),
    JSON.stringify(followUp.prompt),
    followUp.meta === undefined ? 'null' : canonicalJson(followUp.meta),
  ].join(',');
  return hash('sha256', content);
}

/** JSON with object keys sorted. Recursive: only for validated meta, at most 32 levels deep. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
