import { ALL_EVENT_TYPES } from './event.js';

/**
 * The body of a completion event as it leaves over HTTP (contract, section 5): `GET /v1/events`,
 * each message of `/v1/events/stream`, and a webhook's request body. One builder, so all three
 * say the same thing as the stream.
 */

/** The stream entry's `event` object with the entry's `type` first. */
export interface EventBody {
  readonly type: string;
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly [field: string]: unknown;
}

/**
 * The HTTP body of one stream entry, given as its flat field/value list (as XRANGE returns it).
 * An `event` field that is not a JSON object (an entry written by hand) leaves the ids of the
 * entry's own fields, so a consumer can still de-duplicate on `dispatchId`.
 */
export function eventBody(flat: readonly string[]): EventBody {
  const fields = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i] ?? '', flat[i + 1] ?? '');
  const ids = {
    dispatchId: fields.get('dispatchId') ?? '',
    projectId: fields.get('projectId') ?? '',
    jobId: fields.get('jobId') ?? '',
  };
  return { type: fields.get('type') ?? '', ...ids, ...parsedObject(fields.get('event')) };
}

function parsedObject(text: string | undefined): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text ?? '');
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/** The event types a filter may name, by full name (`followup.completed`) and short (`completed`). */
export function eventTypeNamed(name: string): string | undefined {
  for (const type of ALL_EVENT_TYPES as readonly string[])
    if (name === type || `followup.${name}` === type) return type;
  return undefined;
}
